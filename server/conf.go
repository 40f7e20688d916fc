package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"dataservice/internal/clip"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// confGet: GET /api/conf/ — p_api_conf and p_conf_view or p_conf_admin.
func (s *server) confGet(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.denied(w, r, "p_api_conf") {
		return
	}
	p := principalOf(r)
	if !p.has("p_conf_view") && !p.has("p_conf_admin") {
		s.writeError(w, r, http.StatusForbidden, "permission denied: reading the configuration needs p_conf_view or p_conf_admin")
		return
	}
	list, err := s.db.Config(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.reply(w, r, http.StatusOK, map[string]any{"count": len(list), "configuration": list})
}

// confPost: POST /api/conf/ — {keyname: value} updates, all validated first; p_api_conf
// and p_conf_admin; read-only keys refused.
func (s *server) confPost(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	// Both permissions before the read-only check, as in the seed's order of checks.
	if !s.writeGate(w, r, "p_api_conf", "p_conf_admin") {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	updates, err := parseConfigUpdates(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.db.SetConfig(r.Context(), updates); err != nil {
		s.fail(w, r, err)
		return
	}
	s.confGet(w, r, nil)
}

// parseConfigUpdates reads a YAML or JSON mapping of configuration keys to scalar values.
func parseConfigUpdates(body []byte) (map[string]string, error) {
	entries, err := codec.ParseDocument("body", body)
	if err != nil {
		return nil, err
	}
	if len(entries) != 1 || entries[0].Fields == nil {
		return nil, model.Errorf(model.EInvalid, "body must be one mapping of configuration keys to values")
	}
	out := map[string]string{}
	for k, v := range entries[0].Fields {
		text, ok := model.ScalarText(v)
		if !ok {
			return nil, model.Errorf(model.EInvalid, "configuration %s: value must be a scalar", clip.Text(k))
		}
		out[k] = text
	}
	if len(out) == 0 {
		return nil, model.Errorf(model.EInvalid, "no configuration key given")
	}
	return out, nil
}
