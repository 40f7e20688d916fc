package server_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"dataservice/rules"

	"dataservice/internal/testkit"
)

// TestPipelineTagsRefused: an unquoted `!is_prod` gate is a YAML tag, which YAML
// drops from the value: the rule would run as "always" and delete env on every
// server, prod included. Saving such content is refused with the line and a hint to
// quote the condition, and so is a gate on a condition the pipeline never sets;
// nothing is written. Content stored before this check (an old database) is refused
// when it runs, at submission and at load time.
func TestPipelineTagsRefused(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	save := func(content string) reply {
		b, _ := json.Marshal([]map[string]any{{"classname": "_pipeline", "keyname": "newcomer", "content": content}})
		return e.post("/api/load/", e.admin, b)
	}
	cases := []struct{ name, content, want string }{
		{"an unquoted negated gate", "- set_condition: [is_prod, field_match, env, '^prod$']\n- field_delete: [!is_prod, env]\n",
			`content: rule 2: line 2: YAML tag "!is_prod," is not allowed: quote the condition, e.g. '!is_prod'`},
		{"an unquoted gate in a block list", "- set_condition: [is_prod, field_match, env, '^prod$']\n- field_delete:\n  - !is_prod\n  - env\n",
			`content: rule 2: line 3: YAML tag "!is_prod" is not allowed: quote the condition, e.g. '!is_prod'`},
		{"a misspelt condition", "- set_condition: [is_prod, field_match, env, '^prod$']\n- field_delete: ['!is_prdo', env]\n",
			`content: rule 2: field_delete: unknown condition "is_prdo": no set_condition of the pipeline sets it`},
		{"unparsable content", "- [unclosed\n", "content: invalid YAML: yaml: line 1: did not find expected ',' or ']'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := object(t, save(tc.content), 200)
			msgs, _ := o["error_messages"].([]any)
			if num(t, o["errors"]) != 1 || len(msgs) != 1 {
				t.Fatalf("saving gave %v, want one error", o)
			}
			if got, _ := msgs[0].(map[string]any)["message"].(string); got != tc.want {
				t.Fatalf("message: got %q, want %q", got, tc.want)
			}
			if got := e.queryString("SELECT count(*) FROM instances WHERE classname = '_pipeline' AND keyname = 'newcomer'"); got != "0" {
				t.Fatalf("a refused pipeline was written")
			}
		})
	}
	// The quoted gate saves, and runs as written.
	o := object(t, save("- set_condition: [is_prod, field_match, hostname, '^alpha$']\n- field_set: ['!is_prod', site, lab]\n"), 200)
	if num(t, o["created"]) != 1 {
		t.Fatalf("the quoted form was refused: %v", o)
	}
	// Tagged content already in the database (written before the check) is refused
	// when it would run.
	testkit.SetDataField(t, e.db, "_pipeline", "upper", "content", "- set_condition: [c, exists, hostname]\n- field_upper: [!c, hostname]\n")
	wantError(t, e.post("/api/pipelines/upper/?schema=server", e.run, nil), 400,
		`pipeline upper: invalid content: rule 2: line 2: YAML tag "!c," is not allowed: quote the condition, e.g. '!c'`)
	wantError(t, e.post("/api/load/?pipeline=upper", e.loader, []byte(`[{"classname": "server", "keyname": "n1"}]`)), 400,
		`pipeline upper: invalid content: rule 2: line 2: YAML tag "!c," is not allowed: quote the condition, e.g. '!c'`)
}

// TestAuditPipelineAtLoadTime: the audit's pipeline used at load time fails each
// entry at the join that passes the entry bound, naming the rule, and the load's
// allocations stay within ten times what the bound allows.
//
// Serial: it measures the process's allocations, which parallel tests would add to.
func TestAuditPipelineAtLoadTime(t *testing.T) {
	e := newLoadEnv(t, envOptions{NoRunner: true})
	const entries = 3
	var body strings.Builder
	body.WriteString("[")
	for i := range entries {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"classname": "server", "keyname": "a%d"}`, i)
	}
	body.WriteString("]")
	// The smaller pipeline first: without the bound it holds 300 MiB an entry and
	// fails here, before the full one could take gigabytes.
	for _, joins := range []int{300, 3000} {
		ok := t.Run(fmt.Sprint(joins, " joins"), func(t *testing.T) {
			var content strings.Builder
			content.WriteString("- field_set: ['', _a, 0123456789abcdef]\n")
			for range 16 {
				content.WriteString("- field_merge: ['', _a, _a, _a]\n")
			}
			for i := range joins {
				fmt.Fprintf(&content, "- field_join: ['', _j%d, '', _a]\n", i)
			}
			name := fmt.Sprint("audit_", joins)
			b, _ := json.Marshal([]map[string]any{{"classname": "_pipeline", "keyname": name, "content": content.String()}})
			if o := object(t, e.post("/api/load/", e.admin, b), 200); num(t, o["created"]) != 1 {
				t.Fatalf("saving the audit's pipeline: %v", o)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			o := object(t, e.post("/api/load/?pipeline="+name, e.loader, []byte(body.String())), 200)
			runtime.GC()
			runtime.ReadMemStats(&after)
			if num(t, o["errors"]) != entries || num(t, o["created"]) != 0 {
				t.Fatalf("load: %v, want %d errors", o, entries)
			}
			for _, m := range o["error_messages"].([]any) {
				msg, _ := m.(map[string]any)["message"].(string)
				if !strings.HasPrefix(msg, "rule 32: field_join: the entry grew to ") {
					t.Fatalf("message %q does not name rule 32 (the 15th field_join)", msg)
				}
			}
			// An entry makes its 1 MiB value, then 15 joins of 1 MiB: about twice
			// MaxEntryBytes allocated with the builders' growth.
			if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(10*2*rules.MaxEntryBytes*entries); got > limit {
				t.Fatalf("the load allocated %d bytes, want at most %d", got, limit)
			}
		})
		if !ok {
			return
		}
	}
}
