package server_test

import "testing"

// After a field definition is deleted, GET /api/instances/<schema>/?search= no longer
// matches the text its values held (short searches scan, longer ones use the index).
func TestSearchIgnoresDeletedFieldValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.load(serverSchema)
	e.load("- {classname: server, keyname: srv9, site: zebrasite}\n- {classname: server, keyname: srv8, site: q}")
	for _, term := range []string{"zebrasite", "q"} {
		if got := num(t, object(t, e.get("/api/instances/server/?search="+term, adminCred), 200)["count"]); got != 1 {
			t.Fatalf("search %q before the delete: count %d, want 1", term, got)
		}
	}
	e.load("- {classname: _schema, keyname: server, site: {_action: delete}}")
	for _, term := range []string{"zebrasite", "q"} {
		if got := num(t, object(t, e.get("/api/instances/server/?search="+term, adminCred), 200)["count"]); got != 0 {
			t.Fatalf("search %q after the delete: count %d, want 0", term, got)
		}
	}
}
