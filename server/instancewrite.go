package server

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/julienschmidt/httprouter"

	"dataservice/internal/clip"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// instanceWriteMethods are the methods of the one-instance writes of /api/instances/.
var instanceWriteMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// instanceWriteKinds are the writes of /api/instances/ by method.
var instanceWriteKinds = map[string]string{http.MethodPost: store.WriteCreate, http.MethodPut: store.WriteReplace,
	http.MethodPatch: store.WriteMerge, http.MethodDelete: store.WriteDelete}

type dryWriteReply struct {
	DryRun   bool       `json:"dryrun" yaml:"dryrun"`
	Result   string     `json:"result" yaml:"result"`
	Renamed  bool       `json:"renamed" yaml:"renamed"`
	Changed  []string   `json:"changed" yaml:"changed"`
	Instance *model.Doc `json:"instance" yaml:"instance"`
	Warnings []string   `json:"warnings,omitempty" yaml:"warnings,omitempty"`
}

// instanceWrite: POST /api/instances/<schema>/ (create), PUT, PATCH and DELETE
// /api/instances/<schema>/<keyname>/ (replace, merge-patch, delete) — one instance,
// through the same checks and apply path as a load entry. Order of checks, as the
// pipeline routes order theirs (permission, method, read-only): credentials and
// p_data_access, the path (404, 405), read-only key, the schema's read permission,
// If-Match, the body (415, 413, 400), then the write (its own permission, the
// precondition, the values).
func (s *server) instanceWrite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if s.denied(w, r, "p_data_access") {
		return
	}
	rest := ps.ByName("rest")
	if !strings.HasSuffix(rest, "/") {
		s.writeError(w, r, http.StatusNotFound, "not found")
		return
	}
	kind := instanceWriteKinds[r.Method]
	if (kind == store.WriteCreate) != (rest == "/") {
		allow := "GET, PUT, PATCH, DELETE"
		if rest == "/" {
			allow = "GET, POST"
		}
		w.Header().Set("Allow", allow) // a 405 names the methods the path takes
		s.writeError(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if !s.writeGate(w, r) {
		return
	}
	sch := s.readableSchema(w, r, ps.ByName("schema"))
	if sch == nil {
		return
	}
	ow := store.OneWrite{Class: sch.Keyname, Key: instanceKey(rest), Kind: kind, Auth: principalOf(r).auth,
		DryRun: ParseDryRun(r.URL.Query().Get("dryrun"))}
	if v := r.Header.Values("If-Match"); len(v) > 0 {
		if kind == store.WriteCreate {
			s.writeError(w, r, http.StatusBadRequest, "If-Match applies to PUT, PATCH and DELETE of an instance, not to a create")
			return
		}
		tags, ok := parseIfMatch(v)
		if !ok {
			s.writeError(w, r, http.StatusBadRequest, `If-Match must be * or a list of quoted entity tags, as the ETag header gives them`)
			return
		}
		ow.IfMatch = tags
	}
	if kind != store.WriteDelete {
		body, ok := s.instanceBody(w, r, kind == store.WriteMerge)
		if !ok {
			return
		}
		ow.Body = body
	}
	res, err := s.db.WriteOne(r.Context(), ow)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	doc := s.db.InstanceDocAs(r.Context(), principalOf(r).auth, res.Schema, res.Instance)
	if ow.DryRun {
		if res.Changed == nil {
			res.Changed = []string{} // a list in the reply, even when empty
		}
		s.reply(w, r, http.StatusOK, dryWriteReply{DryRun: true, Result: res.Result, Renamed: res.Renamed, Changed: res.Changed, Instance: doc,
			Warnings: res.Warnings})
		return
	}
	status := http.StatusOK
	if kind != store.WriteDelete {
		w.Header().Set("ETag", store.ETag(res.Instance))
	}
	if kind == store.WriteCreate {
		w.Header().Set("Location", instancePath(sch.Keyname, res.Instance.Keyname))
		status = http.StatusCreated
	}
	s.reply(w, r, status, doc)
}

// instancePath is the path of an instance's own URL (each segment of a keyname that
// holds / escaped on its own, so the / stays a separator as the GET route reads it).
func instancePath(cls, key string) string {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return "/api/instances/" + url.PathEscape(cls) + "/" + strings.Join(segs, "/") + "/"
}

// parseIfMatch reads If-Match: "*" or comma-separated entity tags. Weak tags
// (W/"...") are kept with their prefix, so they never match: If-Match compares
// strongly. ok is false for a value that is neither.
func parseIfMatch(values []string) ([]string, bool) {
	var tags []string
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			q := strings.TrimPrefix(t, "W/")
			if t != "*" && (len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' || strings.Contains(q[1:len(q)-1], `"`)) {
				return nil, false
			}
			tags = append(tags, t)
		}
	}
	return tags, len(tags) > 0
}

// instanceBody reads and decodes the body of a one-instance write: one JSON object
// (application/json; application/merge-patch+json for a merge) or one YAML mapping
// (application/yaml). It answers any 4xx itself.
func (s *server) instanceBody(w http.ResponseWriter, r *http.Request, merge bool) (map[string]any, bool) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" {
		mt, err = "application/json", nil
	}
	isJSON := mt == "application/json" || merge && mt == "application/merge-patch+json"
	isYAML := mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml"
	if err != nil || !isJSON && !isYAML {
		accepted := "application/json or application/yaml"
		if merge {
			accepted = "application/merge-patch+json, application/json or application/yaml"
		}
		s.writeError(w, r, http.StatusUnsupportedMediaType, "unsupported Content-Type "+clip.Quote(ct)+"; send "+accepted)
		return nil, false
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return nil, false
	}
	t := bytes.TrimLeft(body, " \t\r\n\ufeff")
	if len(t) == 0 {
		s.writeError(w, r, http.StatusBadRequest, "request body is empty: send one object")
		return nil, false
	}
	if isJSON {
		if t[0] != '{' {
			s.writeError(w, r, http.StatusBadRequest, "request body must be one JSON object")
			return nil, false
		}
		// Checked whole first: it bounds the nesting (and so the decoder's recursion)
		// and names the first syntax error.
		if !json.Valid(t) {
			var v any
			s.writeError(w, r, http.StatusBadRequest, "invalid JSON: "+jsonErrorText(json.Unmarshal(t, &v)))
			return nil, false
		}
	} else if t[0] == '-' || t[0] == '[' {
		s.writeError(w, r, http.StatusBadRequest, "request body must be one YAML mapping, not a list")
		return nil, false
	}
	// No bound on the entries here: a JSON body is one object (checked above), and a
	// YAML one is bounded by codec.MaxYAMLBody (413).
	entries, _, err := codec.ParseBody("body", body, 0)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	if len(entries) != 1 || entries[0].Fields == nil {
		s.writeError(w, r, http.StatusBadRequest, "request body must be one object (POST /api/load/ takes several)")
		return nil, false
	}
	return entries[0].Fields, true
}

// jsonErrorText is a JSON syntax error's message, or a generic one.
func jsonErrorText(err error) string {
	if err == nil {
		return "not valid JSON"
	}
	return err.Error()
}
