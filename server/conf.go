package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"dataservice/store"
)

// confGet: GET /api/conf/ — p_api_conf and p_conf_view or p_conf_admin.
func (s *server) confGet(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.denied(w, r, "p_api_conf") {
		return
	}
	p := principalOf(r)
	if !p.has("p_conf_view") && !p.has("p_conf_admin") {
		s.writeError(w, r, http.StatusForbidden, "permission denied")
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
	updates, err := store.ParseConfigUpdates(body)
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
