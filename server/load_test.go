package server_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"dataservice/store"
)

// loadResult is the reply of /api/load/ and /api/rawfile/.
type loadResult struct {
	Created, Updated, Unchanged, Deleted, Enabled, Disabled, Skipped, Errors int
	DryRun                                                                   bool `json:"dryrun"`
	Messages                                                                 []struct {
		Index     int    `json:"index"`
		Classname string `json:"classname"`
		Keyname   string `json:"keyname"`
		Message   string `json:"message"`
	} `json:"error_messages"`
}

func decodeLoad(t *testing.T, r reply) loadResult {
	t.Helper()
	var m map[string]json.RawMessage
	wantJSON(t, r, 200, &m)
	for _, k := range []string{"created", "updated", "unchanged", "deleted", "enabled", "disabled", "skipped", "errors", "dryrun", "error_messages"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("load result without %s: %s", k, r.body)
		}
	}
	var res loadResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// counts renders a result's counters for one comparison.
func (r loadResult) counts() string {
	b, _ := json.Marshal([]int{r.Created, r.Updated, r.Unchanged, r.Deleted, r.Enabled, r.Disabled, r.Skipped, r.Errors})
	return string(b)
}

// fieldOf reads one stored field value of an instance as text ("" when missing).
func (e *env) fieldOf(cls, key, field string) string {
	e.t.Helper()
	return e.queryString(`SELECT COALESCE(data ->> CAST(? AS TEXT), '') FROM instances WHERE classname = ? AND keyname = ?`,
		field, cls, key)
}

// loadEnv has the server schema, the test pipelines and write keys.
type loadEnv struct {
	*runEnv
	loader, rawfile cred
}

func newLoadEnv(t *testing.T, o envOptions) *loadEnv {
	t.Helper()
	e := newRunEnv(t, o)
	data := []string{"p_data_create", "p_data_update", "p_data_delete", "p_data_read"}
	return &loadEnv{runEnv: e,
		loader:  e.key("loader", keySpec{perms: append([]string{"p_api_load"}, data...)}),
		rawfile: e.key("rawfiler", keySpec{perms: append([]string{"p_api_rawfile"}, data...)}),
	}
}

// TestLoadGate: POST /api/load/ needs p_api_load (never p_data_import) and a key
// that is not read-only.
func TestLoadGate(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	data := []string{"p_data_create", "p_data_update", "p_data_delete", "p_data_read", "p_data_admin"}
	body := []byte(`[{classname: server, keyname: gate1}]`)
	cases := []struct {
		name   string
		c      cred
		status int
		msg    string
	}{
		{"no credentials is 401", noCred, 401, "authentication required"},
		{"p_data_import is not the gate", e.key("importer", keySpec{perms: append([]string{"p_data_import"}, data...)}), 403, "permission denied"},
		{"p_api_rawfile is not the gate", e.rawfile, 403, "permission denied"},
		{"read-only key without p_api_load is the permission denial", e.key("ro_plain", keySpec{perms: data, readOnly: true}), 403, "permission denied"},
		{"read-only key with p_api_load is refused", e.key("ro_load", keySpec{perms: append([]string{"p_api_load"}, data...), readOnly: true}), 403, "API key is read-only"},
		{"GET is 405", e.loader, 405, "method not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.status == 405 {
				method = "GET"
			}
			wantError(t, e.do(method, "/api/load/", tc.c, body), tc.status, tc.msg)
		})
	}
	if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'server' AND keyname = 'gate1'"); got != "0" {
		t.Fatalf("a refused load wrote gate1")
	}
}

// TestLoad: YAML and JSON bodies, counts per outcome, options and malformed bodies.
func TestLoad(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true, MaxBody: 4096})
	t.Run("yaml body counts every outcome", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/", e.loader, []byte(`---
- {classname: server, keyname: n1, hostname: h1}
- {classname: server, keyname: srv1, hostname: alpha}
- {classname: server, keyname: srv3, hostname: changed}
- {classname: server, keyname: srv2, _action: delete}
- {classname: nope, keyname: x}
- {classname: server, keyname: srv1, _action: disable}
- {classname: server, keyname: n2, _action: noop}
`)))
		// created, updated, unchanged, deleted, enabled, disabled, skipped, errors
		if got, want := res.counts(), "[1,1,1,1,0,1,1,1]"; got != want {
			t.Fatalf("counts = %s, want %s (%+v)", got, want, res)
		}
		if got, want := len(res.Messages), 1; got != want {
			t.Fatalf("%d error messages, want %d", got, want)
		}
		m := res.Messages[0]
		if got, want := [3]any{m.Index, m.Classname, m.Keyname}, [3]any{5, "nope", "x"}; got != want {
			t.Fatalf("error entry = %v, want %v", got, want)
		}
		if got, want := m.Message, `unknown class "nope"`; got != want {
			t.Fatalf("error message = %q, want %q", got, want)
		}
		if got, want := e.fieldOf("server", "srv3", "hostname"), "changed"; got != want {
			t.Fatalf("srv3 hostname = %q, want %q", got, want)
		}
	})
	t.Run("json body loads", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/", e.loader, []byte(`[{"classname": "server", "keyname": "j1", "hostname": "jay"}]`)))
		if got, want := res.counts(), "[1,0,0,0,0,0,0,0]"; got != want {
			t.Fatalf("counts = %s, want %s", got, want)
		}
		if got, want := e.fieldOf("server", "j1", "hostname"), "jay"; got != want {
			t.Fatalf("hostname = %q, want %q", got, want)
		}
	})
	t.Run("single object body loads", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/", e.loader, []byte(`{"classname": "server", "keyname": "j2"}`)))
		if got, want := res.Created, 1; got != want {
			t.Fatalf("created = %d, want %d", got, want)
		}
	})
	t.Run("dry run writes nothing", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/?dryrun=yes", e.loader, []byte(`[{classname: server, keyname: dry1}]`)))
		if got, want := res.Created, 1; got != want || !res.DryRun {
			t.Fatalf("created = %d dryrun = %v, want %d true", got, res.DryRun, want)
		}
		if got := e.queryString("SELECT count(*) FROM instances WHERE keyname = 'dry1'"); got != "0" {
			t.Fatalf("dry run stored dry1")
		}
	})
	t.Run("action parameter replaces every entry's action", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/?action=delete", e.loader, []byte(`[{classname: server, keyname: j2, _action: create}]`)))
		if got, want := res.Deleted, 1; got != want {
			t.Fatalf("deleted = %d, want %d", got, want)
		}
	})
	t.Run("pipeline parameter applies its rules", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/?pipeline=upper", e.loader, []byte(`[{classname: server, keyname: up1, hostname: lower}]`)))
		if got, want := res.Created, 1; got != want {
			t.Fatalf("created = %d, want %d", got, want)
		}
		if got, want := e.fieldOf("server", "up1", "hostname"), "LOWER"; got != want {
			t.Fatalf("hostname = %q, want %q", got, want)
		}
	})
	t.Run("entries the key may not write are per-entry errors", func(t *testing.T) {
		c := e.key("load_only", keySpec{perms: []string{"p_api_load"}})
		res := decodeLoad(t, e.post("/api/load/", c, []byte(`[{classname: server, keyname: nope1}]`)))
		if got, want := res.counts(), "[0,0,0,0,0,0,0,1]"; got != want {
			t.Fatalf("counts = %s, want %s", got, want)
		}
	})
	bad := []struct {
		name   string
		query  string
		body   string
		status int
		msg    string
	}{
		{"malformed yaml is 400", "", "[1, 2", 400, "body: invalid YAML/JSON: yaml: line 1: did not find expected ',' or ']'"},
		{"scalar document is 400", "", "just text", 400, "body: document is not a list of objects"},
		{"unknown action is 400", "?action=upsert", "[]", 400, "action must be create, update, init, delete, enable, disable or noop"},
		{"unknown pipeline is 404", "?pipeline=nope", "[]", 404, "pipeline not found"},
		{"pipeline without its run_permission is 403", "?pipeline=guarded", "[]", 403, "permission denied"},
		{"body over the limit is 413", "", "[" + strings.Repeat(" ", 5000) + "]", 413, "request body too large"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.post("/api/load/"+tc.query, e.loader, []byte(tc.body)), tc.status, tc.msg)
		})
	}
}

// TestLoadAliasBomb: a YAML alias bomb is refused without expanding it.
func TestLoadAliasBomb(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	var b strings.Builder
	b.WriteString("- classname: server\n  keyname: bomb\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		b.WriteString("  " + n + ": &" + n + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+", ", 10), ", ") + "]\n")
		prev = n
	}
	wantError(t, e.post("/api/load/", e.loader, []byte(b.String())), 400,
		"body: entry 1: document expands to more than 100000 values (alias bomb?)")
}

// TestRawfile: POST /api/rawfile/ (CSV).
func TestRawfile(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	data := []string{"p_data_create", "p_data_update", "p_data_read"}
	gates := []struct {
		name   string
		c      cred
		status int
		msg    string
	}{
		{"no credentials is 401", noCred, 401, "authentication required"},
		{"p_data_import is not the gate", e.key("importer", keySpec{perms: append([]string{"p_data_import"}, data...)}), 403, "permission denied"},
		{"p_api_load is not the gate", e.loader, 403, "permission denied"},
		{"read-only key with p_api_rawfile is refused", e.key("ro_raw", keySpec{perms: append([]string{"p_api_rawfile"}, data...), readOnly: true}), 403, "API key is read-only"},
	}
	for _, tc := range gates {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.post("/api/rawfile/?schema=server", tc.c, []byte("keyname\ngate1\n")), tc.status, tc.msg)
		})
	}
	ok := []struct {
		name  string
		query string
		body  string
		key   string
		want  string // stored hostname of key
	}{
		{"default delimiter is CSV_DELIMITER", "?schema=server", "keyname;hostname\nc1;h1\n", "c1", "h1"},
		{"keyfield and delimiter", "?schema=server&keyfield=name&delimiter=,", "name,hostname\nc2,h2\n", "c2", "h2"},
		{"tab delimiter", "?schema=server&delimiter=%09", "keyname\thostname\nc3\th3\n", "c3", "h3"},
		{"quoted cell keeps the delimiter", "?schema=server", "keyname;hostname\nc4;\"a;b\"\n", "c4", "a;b"},
		{"iso-8859-1 is converted to UTF-8", "?schema=server&encoding=iso-8859-1", "keyname;hostname\nc5;caf\xe9 \xc0\n", "c5", "café À"},
		{"utf-8 byte order mark is dropped", "?schema=server", "\xef\xbb\xbfkeyname;hostname\nc6;h6\n", "c6", "h6"},
		{"pipeline applies its rules", "?schema=server&pipeline=upper", "keyname;hostname\nc7;shout\n", "c7", "SHOUT"},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			res := decodeLoad(t, e.post("/api/rawfile/"+tc.query, e.rawfile, []byte(tc.body)))
			if got, want := res.counts(), "[1,0,0,0,0,0,0,0]"; got != want {
				t.Fatalf("counts = %s, want %s (%+v)", got, want, res)
			}
			if got := e.fieldOf("server", tc.key, "hostname"); got != tc.want {
				t.Fatalf("hostname = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("second load of the same rows is unchanged", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/rawfile/?schema=server", e.rawfile, []byte("keyname;hostname\nc1;h1\n")))
		if got, want := res.counts(), "[0,0,1,0,0,0,0,0]"; got != want {
			t.Fatalf("counts = %s, want %s", got, want)
		}
	})
	t.Run("dry run writes nothing", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/rawfile/?schema=server&dryrun=1", e.rawfile, []byte("keyname\nc9\n")))
		if res.Created != 1 || !res.DryRun {
			t.Fatalf("result = %+v, want one created, dry run", res)
		}
		if got := e.queryString("SELECT count(*) FROM instances WHERE keyname = 'c9'"); got != "0" {
			t.Fatalf("dry run stored c9")
		}
	})
	bad := []struct {
		name  string
		query string
		body  string
		msg   string
	}{
		{"missing schema is 400", "", "keyname\nx\n", "missing required parameter: schema"},
		{"ragged rows are 400", "?schema=server", "keyname;hostname\nr1;h1;extra\n", "invalid CSV: record on line 2: wrong number of fields"},
		{"invalid UTF-8 is 400 by default", "?schema=server", "keyname;hostname\nr2;caf\xe9\n", "body is not valid UTF-8 (set encoding=iso-8859-1 for Latin-1 files)"},
		{"missing keyfield column is 400", "?schema=server&keyfield=name", "keyname;hostname\nr3;h\n", `invalid CSV: no column named name (keyfield); the header has keyname, hostname (split on ";": set delimiter= or the configuration CSV_DELIMITER)`},
		{"empty body is 400", "?schema=server", "", "empty CSV: a header row is required"},
		{"duplicate column is 400", "?schema=server", "keyname;hostname;hostname\nr4;a;b\n", "invalid CSV: duplicate column hostname"},
		{"two-character delimiter is 400", "?schema=server&delimiter=%3B%3B", "keyname\nr5\n", "delimiter must be one character (not a quote or newline)"},
		{"quote delimiter is 400", "?schema=server&delimiter=%22", "keyname\nr6\n", "delimiter must be one character (not a quote or newline)"},
		{"unknown encoding is 400", "?schema=server&encoding=utf-16", "keyname\nr7\n", "encoding must be utf-8 or iso-8859-1"},
		{"unknown pipeline is 404", "?schema=server&pipeline=nope", "keyname\nr8\n", "pipeline not found"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("/api/rawfile/"+tc.query, e.rawfile, []byte(tc.body))
			status := 400
			if strings.HasSuffix(tc.name, "404") {
				status = 404
			}
			wantError(t, r, status, tc.msg)
		})
	}
	if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'server' AND keyname LIKE 'r_'"); got != "0" {
		t.Fatalf("refused CSV loads stored %s rows", got)
	}
}

// TestConf: /api/conf/ gates exactly as the seed's table, and validated updates.
func TestConf(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	k := func(name string, readOnly bool, perms ...string) cred {
		return e.key(name, keySpec{perms: perms, readOnly: readOnly})
	}
	apiOnly := k("api_only", false, "p_api_conf")
	viewOnly := k("view_only", false, "p_conf_view")
	adminOnly := k("admin_only", false, "p_conf_admin")
	viewer := k("viewer", false, "p_api_conf", "p_conf_view")
	admin := k("conf_admin", false, "p_api_conf", "p_conf_admin")
	roViewer := k("ro_viewer", true, "p_api_conf", "p_conf_view")
	roAdmin := k("ro_admin", true, "p_api_conf", "p_conf_admin")
	roAPI := k("ro_api", true, "p_api_conf")
	body := []byte(`{"DATA_DEFAULT_SIZE": 7}`)
	cases := []struct {
		name   string
		method string
		c      cred
		status int
		msg    string
	}{
		{"GET without credentials is 401", "GET", noCred, 401, "authentication required"},
		{"GET with p_api_conf only is 403", "GET", apiOnly, 403, "permission denied"},
		{"GET with p_conf_view only is 403", "GET", viewOnly, 403, "permission denied"},
		{"GET with p_conf_admin only is 403", "GET", adminOnly, 403, "permission denied"},
		{"GET with p_api_conf and p_conf_view is 200", "GET", viewer, 200, ""},
		{"GET with p_api_conf and p_conf_admin is 200", "GET", admin, 200, ""},
		{"GET by a read-only viewer is 200", "GET", roViewer, 200, ""},
		{"POST without credentials is 401", "POST", noCred, 401, "authentication required"},
		{"POST with p_api_conf and p_conf_view is 403", "POST", viewer, 403, "permission denied"},
		{"POST with p_conf_admin only is 403", "POST", adminOnly, 403, "permission denied"},
		{"POST by a read-only key without p_conf_admin is the permission denial", "POST", roAPI, 403, "permission denied"},
		{"POST by a read-only key with both is refused", "POST", roAdmin, 403, "API key is read-only"},
		{"PUT is 405", "PUT", admin, 405, "method not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, "/api/conf/", tc.c, body)
			if tc.status != 200 {
				wantError(t, r, tc.status, tc.msg)
				return
			}
			var reply struct {
				Count         json.Number `json:"count"`
				Configuration []struct {
					Keyname, Value, DefaultValue, Description string
				} `json:"configuration"`
			}
			wantJSON(t, r, 200, &reply)
			found := false
			for _, c := range reply.Configuration {
				found = found || (c.Keyname == "CSV_DELIMITER" && c.Value == ";")
			}
			n := len(store.ConfigDefs)
			if !found || reply.Count.String() != strconv.Itoa(n) || len(reply.Configuration) != n {
				t.Fatalf("configuration = %+v (count %s), want %d entries (every definition) with CSV_DELIMITER ;", reply.Configuration, reply.Count, n)
			}
		})
	}
	if got, want := e.db.ConfigValue(context.Background(), "DATA_DEFAULT_SIZE"), "200"; got != want {
		t.Fatalf("refused POSTs changed DATA_DEFAULT_SIZE to %q", got)
	}
	t.Run("POST by p_api_conf and p_conf_admin updates", func(t *testing.T) {
		r := e.post("/api/conf/", admin, []byte("DATA_DEFAULT_SIZE: 7\nCSV_DELIMITER: ','\n"))
		if got := string(r.body); r.status != 200 || !strings.Contains(got, `"keyname":"DATA_DEFAULT_SIZE","value":"7"`) {
			t.Fatalf("status %d body %s, want 200 with the new value", r.status, got)
		}
		for key, want := range map[string]string{"DATA_DEFAULT_SIZE": "7", "CSV_DELIMITER": ","} {
			if got := e.db.ConfigValue(context.Background(), key); got != want {
				t.Fatalf("%s = %q, want %q", key, got, want)
			}
		}
	})
	bad := []struct {
		name string
		body string
		msg  string
	}{
		{"unknown key is 400", `{"DATA_DEFAULT_SIZE": 9, "NOPE": 1}`, `unknown configuration key "NOPE"`},
		{"non-integer value is 400", `{"DATA_MAX_SIZE": "lots"}`, `configuration DATA_MAX_SIZE: "lots" is not an integer`},
		{"out-of-range value is 400", `{"QUEUE_MAX": 0}`, "configuration QUEUE_MAX: 0 is outside 1..1000000"},
		{"long delimiter is 400", `{"CSV_DELIMITER": ";;"}`, "configuration CSV_DELIMITER: must be exactly one character"},
		{"list body is 400", `[{"A": 1}, {"B": 2}]`, "body must be one mapping of configuration keys to values"},
		{"empty mapping is 400", `{}`, "no configuration key given"},
	}
	for _, tc := range bad {
		t.Run(tc.name+" and changes nothing", func(t *testing.T) {
			wantError(t, e.post("/api/conf/", admin, []byte(tc.body)), 400, tc.msg)
			for key, want := range map[string]string{"DATA_DEFAULT_SIZE": "7", "DATA_MAX_SIZE": "500", "QUEUE_MAX": "1000", "CSV_DELIMITER": ","} {
				if got := e.db.ConfigValue(context.Background(), key); got != want {
					t.Fatalf("%s = %q, want %q", key, got, want)
				}
			}
		})
	}
}

// TestLoadReportsUncollectedAddresses: an address the ipam_ip schema refuses is not
// collected; the load succeeds and its reply's warnings name the address and why.
func TestLoadReportsUncollectedAddresses(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	e.load(`
- {classname: _schema, keyname: nic, ip: {dataformat: ipv4}}
- {classname: _schema, keyname: ipam_ip, owner: {dataformat: string, cardinal_min: 1}}
`)
	r := e.post("/api/load/", e.loader, []byte(`[{classname: nic, keyname: n1, ip: 10.7.0.1}]`))
	res := decodeLoad(t, r)
	if got, want := res.counts(), "[1,0,0,0,0,0,0,0]"; got != want {
		t.Fatalf("counts = %s, want %s (%s)", got, want, r.body)
	}
	var body struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Warnings) != 1 || !strings.Contains(body.Warnings[0], "ipam_ip 10.7.0.1 not collected") ||
		!strings.Contains(body.Warnings[0], "owner") {
		t.Fatalf("warnings = %q, want one naming 10.7.0.1 and the field owner", body.Warnings)
	}
	if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'ipam_ip' AND keyname = '0a070001'"); got != "0" {
		t.Fatalf("the refused address was written")
	}
}
