package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// maxErrorBytes bounds one error message that quotes a huge input: the message's
// own words plus the input cut to about 200 characters.
const maxErrorBytes = 300

// errorMessages are the messages of a reply: its "error" and the load result's
// "error_messages".
func errorMessages(t *testing.T, r reply) []string {
	t.Helper()
	var v struct {
		Error         string           `json:"error"`
		ErrorMessages []map[string]any `json:"error_messages"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("reply %d is not JSON: %.300s", r.status, r.body)
	}
	var out []string
	for _, m := range v.ErrorMessages {
		for _, k := range []string{"classname", "keyname", "message"} {
			if s, _ := m[k].(string); s != "" {
				out = append(out, k+": "+s)
			}
		}
	}
	if v.Error != "" {
		out = append(out, v.Error)
	}
	return out
}

// TestErrorsQuoteHugeInputBounded: every error that quotes a caller's input (a CSV
// header, a keyname, a field name, a rule name or condition, a schema name, a
// parameter) quotes at most about 200 characters of it, whatever its size.
func TestErrorsQuoteHugeInputBounded(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	huge := strings.Repeat("h", 16<<20)
	long := strings.Repeat("L", 100_000)
	// URLs stay under the server's 1 MB bound of request headers.
	mid := strings.Repeat("M", 20_000)
	yamlQ := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	pipeline := func(content string) []byte {
		return []byte(`[{"classname": "_pipeline", "keyname": "p_long", "content": ` + yamlQ(content) + `}]`)
	}
	cases := []struct {
		name, method, path string
		c                  cred
		body               []byte
	}{
		{"a 16 MB CSV header", "POST", "/api/rawfile/?schema=server", e.rawfile, []byte(huge + "\nx\n")},
		{"a 16 MB CSV header with a delimiter", "POST", "/api/rawfile/?schema=server", e.rawfile, []byte("keyname;" + huge + ";" + huge + "\nx;y;z\n")},
		{"a long keyfield", "POST", "/api/rawfile/?schema=server&keyfield=" + mid, e.rawfile, []byte("keyname\nx\n")},
		{"a long delimiter", "POST", "/api/rawfile/?schema=server&delimiter=" + mid, e.rawfile, []byte("keyname\nx\n")},
		{"a long encoding", "POST", "/api/rawfile/?schema=server&encoding=" + mid, e.rawfile, []byte("keyname\nx\n")},
		{"a long rawfile schema", "POST", "/api/rawfile/?schema=" + mid, e.rawfile, []byte("keyname\nx\n")},
		{"a long load pipeline name", "POST", "/api/load/?pipeline=" + mid, e.loader, []byte(`[]`)},
		{"a long load action", "POST", "/api/load/?action=" + mid, e.loader, []byte(`[]`)},
		{"a long keyname", "POST", "/api/load/", e.loader, []byte(`[{"classname": "server", "keyname": "` + long + ` x"}]`)},
		{"a long classname", "POST", "/api/load/", e.loader, []byte(`[{"classname": "` + long + `", "keyname": "k"}]`)},
		{"a long _action", "POST", "/api/load/", e.loader, []byte(`[{"classname": "server", "keyname": "k", "_action": "` + long + `"}]`)},
		{"a long is_enabled", "POST", "/api/load/", e.loader, []byte(`[{"classname": "server", "keyname": "k", "is_enabled": "` + long + `"}]`)},
		{"a long field name", "POST", "/api/load/", e.admin, []byte(`[{"classname": "_schema", "keyname": "wide", "` + long + `": {"dataformat": "string"}}]`)},
		{"a long dataformat", "POST", "/api/load/", e.admin, []byte(`[{"classname": "_schema", "keyname": "wide", "f": {"dataformat": "` + long + `"}}]`)},
		{"a long rule name", "POST", "/api/load/", e.admin, pipeline("- " + long + ": ['', a]\n")},
		{"a long condition", "POST", "/api/load/", e.admin, pipeline("- field_lower: [" + long + ", a]\n")},
		{"a long tag", "POST", "/api/load/", e.admin, pipeline("- field_lower: [!" + long + ", a]\n")},
		{"a long checker", "POST", "/api/load/", e.admin, pipeline("- set_condition: [c, " + long + ", a]\n")},
		{"a long regex", "POST", "/api/load/", e.admin, pipeline("- field_regexp_sub: ['', a, '(" + long + "', x]\n")},
		{"a long date expression", "POST", "/api/load/", e.admin, pipeline("- field_datetime: ['', a, 'now() +1" + long + "']\n")},
		{"long schema names in a run", "POST", "/api/pipelines/upper/?schema=" + mid + "," + mid, e.run, nil},
		{"a long pipeline name in a run", "POST", "/api/pipelines/" + mid + "/?schema=server", e.run, nil},
		{"a long instance path", "GET", "/api/instances/server/" + mid + "/", e.admin, nil},
		{"a long schema path", "GET", "/api/schemas/" + mid + "/", e.admin, nil},
		{"a long task handle", "GET", "/api/tasks/" + mid + "/", e.admin, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.c, tc.body)
			msgs := errorMessages(t, r)
			if len(msgs) == 0 {
				t.Fatalf("status %d without an error: %.300s", r.status, r.body)
			}
			limit := maxErrorBytes
			if tc.name == "a long date expression" {
				limit *= 2 // it quotes the expression, then the part of it that is wrong
			}
			for _, m := range msgs {
				if len(m) > limit {
					t.Errorf("status %d: a %d-byte error: %.400s", r.status, len(m), m)
				}
			}
			if testing.Verbose() {
				t.Logf("%d %s", r.status, fmt.Sprint(msgs))
			}
		})
	}
}
