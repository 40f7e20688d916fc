package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"dataservice/server"
)

var docMethods = []string{"get", "post", "put", "patch", "delete", "head", "options"}

// patternRE turns an httprouter pattern into a regexp: ":x" one segment, "*x" the rest.
func patternRE(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i, seg := range strings.Split(p, "/") {
		if i > 0 {
			b.WriteString("/")
		}
		switch {
		case strings.HasPrefix(seg, ":"):
			b.WriteString("[^/]+")
		case strings.HasPrefix(seg, "*"):
			b.WriteString(".*")
		default:
			b.WriteString(regexp.QuoteMeta(seg))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// TestOpenAPIDescribesEveryRouteAndNothingElse derives the route list from the router:
// a route without a description, or a described operation no route serves, fails.
func TestOpenAPIDescribesEveryRouteAndNothingElse(t *testing.T) {
	t.Parallel()
	doc, err := server.OpenAPI("test")
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("no paths")
	}
	routes := server.RouteList()
	if len(routes) < 15 {
		t.Fatalf("only %d routes from the router", len(routes))
	}
	covered := map[server.Route]bool{}
	param := regexp.MustCompile(`\{[^}/]+\}`)
	for path, v := range paths {
		item, _ := v.(map[string]any)
		concrete := param.ReplaceAllString(path, "x")
		for _, m := range docMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			if d, _ := op["summary"].(string); d == "" {
				t.Errorf("%s %s: no summary", strings.ToUpper(m), path)
			}
			if resp, _ := op["responses"].(map[string]any); len(resp) == 0 {
				t.Errorf("%s %s: no responses", strings.ToUpper(m), path)
			}
			found := false
			for _, r := range routes {
				if strings.EqualFold(r.Method, m) && patternRE(r.Path).MatchString(concrete) {
					covered[r], found = true, true
				}
			}
			if !found {
				t.Errorf("%s %s is described but no route serves it", strings.ToUpper(m), path)
			}
		}
	}
	var missing []string
	for _, r := range routes {
		if !covered[r] {
			missing = append(missing, r.Method+" "+r.Path)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("routes without a description in server/apidoc/openapi.yaml:\n  %s", strings.Join(missing, "\n  "))
	}
}

// The seed's order of checks for a pipeline run is in the operation's description, in order.
func TestOpenAPIRunPipelineStatesTheOrderOfChecks(t *testing.T) {
	t.Parallel()
	doc, err := server.OpenAPI("")
	if err != nil {
		t.Fatal(err)
	}
	op := doc["paths"].(map[string]any)["/api/pipelines/{pipeline}/"].(map[string]any)["post"].(map[string]any)
	desc := op["description"].(string)
	last := -1
	for _, msg := range []string{"p_pipeline_run", "method not allowed", "API key is read-only",
		"missing required parameter: schema", "missing pipeline identifier", "pipeline not found", "failed to submit task"} {
		i := strings.Index(desc, msg)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in the run description:\n%s", msg, desc)
		}
		last = i
	}
	for _, code := range []string{"202", "400", "401", "403", "404", "503"} {
		if _, ok := op["responses"].(map[string]any)[code]; !ok {
			t.Errorf("run: no %s response", code)
		}
	}
}

func TestOpenAPIAndDocsAreServedWithoutCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/api/openapi.json")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct{ Version string }
		Paths   map[string]any
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Version != "4.9.0" || doc.Paths["/api/load/"] == nil {
		t.Fatalf("openapi.json: openapi %q version %q, %d paths", doc.OpenAPI, doc.Info.Version, len(doc.Paths))
	}
	resp, body = get("/api/docs/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `<script src="app.js"></script>`) {
		t.Fatalf("docs page: %d %s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("docs page CSP %q", csp)
	}
	resp, body = get("/api/docs/app.js")
	if resp.StatusCode != 200 || !strings.Contains(body, `fetch("../openapi.json"`) {
		t.Fatalf("app.js: %d", resp.StatusCode)
	}
	// Nothing but our own script: no external URL is loaded.
	if regexp.MustCompile(`(?i)(src|href)="https?://`).MatchString(body) {
		t.Fatal("app.js refers to an external URL")
	}
	if resp, _ = get("/api/docs/other.js"); resp.StatusCode != 404 {
		t.Fatalf("unknown docs file: %d", resp.StatusCode)
	}
}

// Every operation that can refuse credentials (it declares 401) declares the
// credential throttle's 429, whose response carries Retry-After, and a 503 whose
// response carries Retry-After too (the credentials not checked: too many waiting).
func TestOpenAPIDeclaresThrottle(t *testing.T) {
	t.Parallel()
	doc, err := server.OpenAPI("")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, v := range doc["paths"].(map[string]any) {
		for _, m := range docMethods {
			op, ok := v.(map[string]any)[m].(map[string]any)
			if !ok {
				continue
			}
			resp, _ := op["responses"].(map[string]any)
			r401, ok := resp["401"].(map[string]any)
			if !ok {
				continue
			}
			if ref, _ := r401["$ref"].(string); ref == "#/components/responses/NoSession" {
				continue // a console form post without a session: no credentials are checked
			}
			n++
			if _, ok := resp["429"]; !ok {
				t.Errorf("%s %s declares 401 but not 429", strings.ToUpper(m), path)
			}
			if !hasRetryAfter(doc, resp["503"]) {
				t.Errorf("%s %s declares 401 but no 503 with Retry-After", strings.ToUpper(m), path)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d operations declare 401", n)
	}
	tmr, _ := doc["components"].(map[string]any)["responses"].(map[string]any)["TooManyRequests"].(map[string]any)
	if _, ok := tmr["headers"].(map[string]any)["Retry-After"]; !ok {
		t.Fatalf("the 429 response declares no Retry-After: %v", tmr)
	}
}

// hasRetryAfter reports whether the response r (inline or a $ref to a component)
// declares a Retry-After header.
func hasRetryAfter(doc map[string]any, r any) bool {
	m, _ := r.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/responses/")
		m, _ = doc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
	}
	h, _ := m["headers"].(map[string]any)
	_, ok := h["Retry-After"]
	return ok
}

// resolveResponse returns the response r, following a $ref to a component.
func resolveResponse(doc map[string]any, r any) map[string]any {
	m, _ := r.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/responses/")
		m, _ = doc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
	}
	return m
}

// Every reply the server encodes itself is JSON or YAML, as the request asks (?format=yaml
// or Accept): a response declaring application/json declares application/yaml too, with
// the YAMLReply schema. Only /api/openapi.json is JSON whatever is asked.
func TestOpenAPIDeclaresYAMLBesideJSON(t *testing.T) {
	t.Parallel()
	doc, err := server.OpenAPI("")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, v := range doc["paths"].(map[string]any) {
		if path == "/api/openapi.json" {
			continue
		}
		for _, m := range docMethods {
			op, ok := v.(map[string]any)[m].(map[string]any)
			if !ok {
				continue
			}
			resp, _ := op["responses"].(map[string]any)
			for status, r := range resp {
				content, _ := resolveResponse(doc, r)["content"].(map[string]any)
				if _, ok := content["application/json"]; !ok {
					continue
				}
				n++
				y, _ := content["application/yaml"].(map[string]any)
				schema, _ := y["schema"].(map[string]any)
				if ref, _ := schema["$ref"].(string); ref != "#/components/schemas/YAMLReply" {
					t.Errorf("%s %s %s: application/json without application/yaml (schema YAMLReply)", strings.ToUpper(m), path, status)
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d JSON responses found", n)
	}
}
