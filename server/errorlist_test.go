package server_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store/model"
)

// errorListSchema has fields of several dataformats, in this order.
const errorListSchema = `
- classname: _schema
  keyname: rack
  units: {dataformat: int, dataformat_ext: gte_1 lte_60}
  mgmt: {dataformat: ipv4}
  installed: {dataformat: date}
  notes: {dataformat: string}
`

// entryErrors is an error_messages item with its problems.
type entryErrors struct {
	Index   int             `json:"index"`
	Keyname string          `json:"keyname"`
	Message string          `json:"message"`
	Errors  []model.Problem `json:"errors"`
}

type loadReport struct {
	Created           int           `json:"created"`
	Errors            int           `json:"errors"`
	Messages          []entryErrors `json:"error_messages"`
	Warnings          []string      `json:"warnings"`
	UnknownFields     int           `json:"unknown_fields"`
	UnknownFieldNames []string      `json:"unknown_field_names"`
}

func postLoad(t *testing.T, e *loadEnv, path, doc string) loadReport {
	t.Helper()
	var res loadReport
	wantJSON(t, e.post(path, e.loader, []byte(doc)), 200, &res)
	return res
}

// fieldsOf renders problems as field=code lists for one comparison.
func fieldsOf(list []model.Problem) string {
	var out []string
	for _, p := range list {
		out = append(out, p.Field+"="+p.Code)
	}
	return strings.Join(out, " ")
}

// TestLoadEntryListsEveryProblem: a load entry reports every problem in one answer,
// in entry order, the first one as the message it always had; which entries load
// does not change.
func TestLoadEntryListsEveryProblem(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	e.load(errorListSchema)

	t.Run("three bad values are three problems in entry order", func(t *testing.T) {
		res := postLoad(t, e, "/api/load/", `
- {classname: rack, keyname: r1, installed: someday, units: 99, notes: fine, mgmt: 10.0.0.300}
- {classname: rack, keyname: r2, units: 4}
`)
		if res.Errors != 1 || res.Created != 1 || len(res.Messages) != 1 {
			t.Fatalf("result %+v, want r2 created and r1 refused", res)
		}
		m := res.Messages[0]
		if got, want := fieldsOf(m.Errors), "installed=invalid units=invalid mgmt=invalid"; got != want {
			t.Fatalf("problems %s, want %s (%+v)", got, want, m.Errors)
		}
		if m.Message != m.Errors[0].Message || !strings.Contains(m.Message, `field installed: "someday" is not a date`) {
			t.Fatalf("message %q is not the first problem %+v", m.Message, m.Errors[0])
		}
		if !strings.Contains(m.Errors[1].Message, "out of bounds") || !strings.Contains(m.Errors[2].Message, "not an IPv4 address") {
			t.Fatalf("problems %+v", m.Errors)
		}
		if n := e.queryString(`SELECT COUNT(*) FROM instances WHERE classname = 'rack' AND keyname = 'r1'`); n != "0" {
			t.Fatalf("the refused entry was written (%s rows)", n)
		}
	})

	t.Run("a bad header and bad values are reported together, the header first", func(t *testing.T) {
		res := postLoad(t, e, "/api/load/", `[{classname: rack, keyname: r3, is_enabled: maybe, units: 0, _action: frobnicate}]`)
		if len(res.Messages) != 1 {
			t.Fatalf("result %+v", res)
		}
		if got, want := fieldsOf(res.Messages[0].Errors), "is_enabled=invalid _action=invalid units=invalid"; got != want {
			t.Fatalf("problems %s, want %s", got, want)
		}
		if got, want := res.Messages[0].Message, `is_enabled "maybe" is not a boolean`; got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	})

	t.Run("a bad keyname and bad values are reported together", func(t *testing.T) {
		res := postLoad(t, e, "/api/load/", `[{classname: rack, keyname: "bad key", units: x}]`)
		if got, want := fieldsOf(res.Messages[0].Errors), "keyname=invalid units=invalid"; got != want {
			t.Fatalf("problems %s, want %s", got, want)
		}
		res = postLoad(t, e, "/api/load/", `[{classname: rack, keyname: "bad key", is_enabled: maybe, units: x}]`)
		if got, want := fieldsOf(res.Messages[0].Errors), "is_enabled=invalid keyname=invalid units=invalid"; got != want {
			t.Fatalf("with a bad header too: problems %s, want %s", got, want)
		}
	})

	t.Run("a disable's other field changes are named as not applied", func(t *testing.T) {
		for _, path := range []string{"/api/load/?dryrun=1", "/api/load/"} {
			res := postLoad(t, e, path, `[{classname: rack, keyname: r2, _action: disable, units: 9, notes: new, mgmt: ""}]`)
			if len(res.Warnings) != 1 || !strings.HasSuffix(res.Warnings[0], "(rack r2): disabled; 2 field changes not applied") {
				t.Fatalf("%s: warnings %q", path, res.Warnings)
			}
		}
		if got := e.fieldOf("rack", "r2", "units"); got != "4" {
			t.Fatalf("units = %q after a disable, want 4 kept", got)
		}
	})

	t.Run("one problem is a list of one", func(t *testing.T) {
		res := postLoad(t, e, "/api/load/", `[{classname: rack, keyname: r4, units: 61}]`)
		if got, want := fieldsOf(res.Messages[0].Errors), "units=invalid"; got != want {
			t.Fatalf("problems %s, want %s", got, want)
		}
	})

	t.Run("a pipeline's bad rules are listed together", func(t *testing.T) {
		admin := e.key("pipeadmin", keySpec{perms: []string{"p_api_load", "p_pipeline_admin"}})
		var res loadReport
		wantJSON(t, e.post("/api/load/", admin, []byte(`
- classname: _pipeline
  keyname: typos
  content: |
    - field_uper: ['', hostname]
    - field_upper: ['', hostname]
    - field_copy: ['', a, b, c]
`)), 200, &res)
		if len(res.Messages) != 1 {
			t.Fatalf("result %+v", res)
		}
		m := res.Messages[0]
		if got, want := fieldsOf(m.Errors), "content=invalid content=invalid"; got != want {
			t.Fatalf("problems %s, want %s (%+v)", got, want, m.Errors)
		}
		if !strings.HasPrefix(m.Errors[0].Message, "content: rule 1: unknown rule") || !strings.HasPrefix(m.Errors[1].Message, "content: rule 3: field_copy") {
			t.Fatalf("problems %+v", m.Errors)
		}
	})
}

// TestErrorReplyListsProblems: every error reply carries errors, a list whose first
// item is the error; a reply about a rule list names every bad rule.
func TestErrorReplyListsProblems(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	decode := func(r reply) (string, []model.Problem) {
		t.Helper()
		var m struct {
			Error  string          `json:"error"`
			Errors []model.Problem `json:"errors"`
		}
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		return m.Error, m.Errors
	}

	t.Run("a 400 of the store lists the error with its code", func(t *testing.T) {
		r := e.post("/api/load/?action=frobnicate", e.loader, []byte(`[]`))
		msg, list := decode(r)
		if r.status != 400 || len(list) != 1 || list[0].Message != msg || list[0].Code != model.EInvalid || list[0].Field != "" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	t.Run("a load-time pipeline with two bad rules names both", func(t *testing.T) {
		testkit.SetDataField(t, e.db, "_pipeline", "broken", "content", "- no_such_rule: [x]\n- field_noop: ['']\n- other_rule: [y]\n")
		r := e.post("/api/load/?pipeline=broken", e.loader, []byte(`[]`))
		msg, list := decode(r)
		if r.status != 400 || msg != `pipeline broken: invalid content: rule 1: unknown rule "no_such_rule"` {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if len(list) != 2 || list[0].Message != msg || list[1].Message != `pipeline broken: invalid content: rule 3: unknown rule "other_rule"` ||
			list[1].Field != "content" {
			t.Fatalf("errors %+v", list)
		}
	})

	t.Run("a run of a pipeline with two bad rules names both, still a 400 with the first", func(t *testing.T) {
		runner := e.key("errrunner", keySpec{perms: []string{"p_pipeline_run"}})
		testkit.SetDataField(t, e.db, "_pipeline", "broken", "content", "- no_such_rule: [x]\n- field_noop: ['']\n- other_rule: [y]\n")
		r := e.post("/api/pipelines/broken/?schema=server", runner, nil)
		msg, list := decode(r)
		if r.status != 400 || msg != `pipeline broken: invalid content: rule 1: unknown rule "no_such_rule"` {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if len(list) != 2 || list[0].Message != msg || list[0].Code != model.EInvalid || list[0].Field != "content" ||
			list[1].Message != `pipeline broken: invalid content: rule 3: unknown rule "other_rule"` {
			t.Fatalf("errors %+v", list)
		}
	})

	t.Run("a 403 names the permission the request needs", func(t *testing.T) {
		r := e.post("/api/load/", e.noPerm, []byte(`[]`))
		msg, list := decode(r)
		if r.status != 403 || msg != "permission denied: this request needs p_api_load" || list[0].Code != model.EForbidden {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	t.Run("a refused write names the permission of its operation", func(t *testing.T) {
		creator := e.key("creator", keySpec{perms: []string{"p_api_load", "p_data_create"}})
		var res loadReport
		wantJSON(t, e.post("/api/load/", creator, []byte(`[{classname: server, keyname: srv1, hostname: changed}]`)), 200, &res)
		if len(res.Messages) != 1 || res.Messages[0].Message != "permission denied: update of server needs p_data_update" {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("a one-instance write with a bad header key and bad values names them all", func(t *testing.T) {
		e.load("- {classname: _schema, keyname: errbox, n: {dataformat: int}, m: {dataformat: int}}")
		writer := e.key("errwriter", keySpec{perms: []string{"p_data_access", "p_data_read", "p_data_create", "p_data_update"}})
		before := e.instanceRows()
		for _, w := range []struct{ method, path string }{{"POST", "/api/instances/errbox/"}, {"PUT", "/api/instances/errbox/b0/"}} {
			if w.method == "PUT" {
				object(t, e.send("POST", "/api/instances/errbox/", writer, "application/json", `{"keyname": "b0"}`), 201)
				before = e.instanceRows()
			}
			r := e.send(w.method, w.path, writer, "application/json", `{"keyname": "b0", "is_enabled": "maybe", "n": "x", "m": "y"}`)
			msg, list := decode(r)
			if r.status != 400 || len(list) != 3 || list[0].Message != msg || list[0].Field != "is_enabled" ||
				list[1].Field != "n" || list[2].Field != "m" {
				t.Fatalf("%s: %d %s", w.method, r.status, r.body)
			}
			if e.instanceRows() != before {
				t.Fatalf("%s: a refused write changed the tables", w.method)
			}
		}
	})

	t.Run("reading a schema one may not names its read permission, not the caller's", func(t *testing.T) {
		r := e.get("/api/instances/_apikey/", e.noPerm)
		msg, _ := decode(r)
		if r.status != 403 || msg != "permission denied: reading _apikey needs p_apikey_admin" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	t.Run("the read-only refusal keeps its fixed message", func(t *testing.T) {
		r := e.post("/api/pipelines/upper/?schema=server", e.readOnly, nil)
		msg, list := decode(r)
		if r.status != 403 || msg != "API key is read-only" || len(list) != 1 || list[0].Code != model.EForbidden {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	t.Run("a run without p_pipeline_run names it", func(t *testing.T) {
		r := e.post("/api/pipelines/upper/?schema=server", e.noPerm, nil)
		msg, _ := decode(r)
		if r.status != 403 || msg != "permission denied: this request needs p_pipeline_run" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}

// TestLoadUnknownFields: a value under a name the schema has no field of is ignored
// with a warning that counts them and lists the first names; ?strict=1 refuses the
// entry naming each.
func TestLoadUnknownFields(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	e.load(errorListSchema)
	doc := `
- {classname: rack, keyname: u1, unts: 4, notes: a, colour: red}
- {classname: rack, keyname: u2, unts: 5}
- {classname: rack, keyname: u3, units: 6, _scratch: x}
`
	res := postLoad(t, e, "/api/load/", doc)
	if res.Created != 3 || res.Errors != 0 {
		t.Fatalf("result %+v, want all three created", res)
	}
	if got, want := res.UnknownFields, 3; got != want {
		t.Fatalf("unknown_fields = %d, want %d", got, want)
	}
	if got, want := strings.Join(res.UnknownFieldNames, ","), "rack.unts,rack.colour"; got != want {
		t.Fatalf("unknown_field_names = %s, want %s", got, want)
	}
	if len(res.Warnings) != 1 || res.Warnings[0] != "3 values under unknown field names were ignored (rack.unts, rack.colour)" {
		t.Fatalf("warnings %q", res.Warnings)
	}

	var many strings.Builder
	many.WriteString("- {classname: rack, keyname: m1")
	for i := 0; i < 25; i++ {
		many.WriteString(", x" + strconv.Itoa(i) + ": 1")
	}
	many.WriteString("}\n")
	bounded := postLoad(t, e, "/api/load/?dryrun=1", many.String())
	if bounded.UnknownFields != 25 || len(bounded.UnknownFieldNames) != 20 || bounded.UnknownFieldNames[19] != "rack.x19" ||
		len(bounded.Warnings) != 1 || !strings.HasSuffix(bounded.Warnings[0], "rack.x19, ...)") {
		t.Fatalf("25 unknown names: %+v", bounded)
	}

	strict := postLoad(t, e, "/api/load/?strict=1", `
- {classname: rack, keyname: s1, snts: 4, notes: a, colour: red}
- {classname: rack, keyname: s2, snts: 5, units: 0}
- {classname: rack, keyname: s3, units: 6, _scratch: x}
- {classname: rack, keyname: "s 4", units: 0, snts: 3}
`)
	if strict.Errors != 3 || strict.Created != 1 {
		t.Fatalf("strict result %+v, want the two entries with unknown fields refused", strict)
	}
	m := strict.Messages[0]
	if got, want := fieldsOf(m.Errors), "snts=invalid colour=invalid"; got != want {
		t.Fatalf("strict problems %s, want %s", got, want)
	}
	if got, want := m.Message, `unknown field "snts" of rack (a strict load refuses it)`; got != want {
		t.Fatalf("strict message %q, want %q", got, want)
	}
	if got, want := fieldsOf(strict.Messages[1].Errors), "snts=invalid units=invalid"; got != want {
		t.Fatalf("strict problems with a bad value %s, want %s", got, want)
	}
	if got, want := fieldsOf(strict.Messages[2].Errors), "keyname=invalid snts=invalid units=invalid"; got != want {
		t.Fatalf("strict problems with a bad keyname %s, want %s", got, want)
	}
	if len(strict.Warnings) != 1 || strict.Warnings[0] != "4 values under unknown field names were refused (rack.snts, rack.colour)" {
		t.Fatalf("strict warnings %q", strict.Warnings)
	}
	if n := e.queryString(`SELECT COUNT(*) FROM instances WHERE classname = 'rack' AND keyname IN ('s1', 's2')`); n != "0" {
		t.Fatalf("a strict load wrote %s refused entries", n)
	}

	// A CSV file's column that names no field: the same warning, and ?strict=1 refuses.
	var raw loadReport
	wantJSON(t, e.post("/api/rawfile/?schema=rack", e.rawfile, []byte("keyname;unts\nc1;4\n")), 200, &raw)
	if raw.Created != 1 || raw.UnknownFields != 1 || strings.Join(raw.UnknownFieldNames, ",") != "rack.unts" {
		t.Fatalf("rawfile with an unknown column: %+v", raw)
	}
	wantJSON(t, e.post("/api/rawfile/?schema=rack&strict=1", e.rawfile, []byte("keyname;unts\nc2;4\n")), 200, &raw)
	if raw.Created != 0 || raw.Errors != 1 || fieldsOf(raw.Messages[0].Errors) != "unts=invalid" {
		t.Fatalf("strict rawfile with an unknown column: %+v", raw)
	}
}
