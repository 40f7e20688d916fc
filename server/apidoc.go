package server

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/julienschmidt/httprouter"
	"gopkg.in/yaml.v3"
)

// The API description: apidoc/openapi.yaml is the source, served as JSON at
// /api/openapi.json; /api/docs/ renders it with our own small page and script.
//
//go:embed apidoc/openapi.yaml apidoc/index.html apidoc/app.js
var apidocFS embed.FS

var (
	openAPIOnce sync.Once
	openAPIDoc  map[string]any
	openAPIErr  error
)

// OpenAPI returns the API description as a JSON-ready value with info.version set.
func OpenAPI(version string) (map[string]any, error) {
	openAPIOnce.Do(func() {
		b, err := apidocFS.ReadFile("apidoc/openapi.yaml")
		if err != nil {
			openAPIErr = err
			return
		}
		openAPIErr = yaml.Unmarshal(b, &openAPIDoc)
	})
	if openAPIErr != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", openAPIErr)
	}
	// A shallow copy with its own info, so the shared document is never written.
	doc := make(map[string]any, len(openAPIDoc))
	for k, v := range openAPIDoc {
		doc[k] = v
	}
	info := map[string]any{}
	if src, ok := openAPIDoc["info"].(map[string]any); ok {
		for k, v := range src {
			info[k] = v
		}
	}
	if version != "" {
		info["version"] = version
	}
	doc["info"] = info
	return doc, nil
}

// openAPI: GET /api/openapi.json — no credentials.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	doc, err := OpenAPI(s.version)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(b)
}

// apiDocs: GET /api/docs/ (the page) and /api/docs/app.js (its script) — no credentials.
func (s *server) apiDocs(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var name, ctype string
	switch ps.ByName("file") {
	case "/":
		name, ctype = "apidoc/index.html", "text/html; charset=utf-8"
	case "/app.js":
		name, ctype = "apidoc/app.js", "text/javascript; charset=utf-8"
	default:
		s.writeError(w, r, http.StatusNotFound, "not found")
		return
	}
	b, err := apidocFS.ReadFile(name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(b)
}
