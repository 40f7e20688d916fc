package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestReadyMadePermissionSets: the sets docs/users.md offers do what the page says
// they can and are refused what it says they cannot.
func TestReadyMadePermissionSets(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{})
	e.load("- {classname: server, keyname: s1, hostname: a}\n- {classname: server, keyname: s2, hostname: b}\n")
	sets := map[string][]string{
		"viewer":  {"p_data_access", "p_data_read"},
		"runner":  {"p_data_access", "p_data_read", "p_data_update", "p_pipeline_run"},
		"loader":  {"p_data_access", "p_api_load", "p_api_rawfile", "p_data_create", "p_data_update"},
		"manager": {"p_data_access", "p_api_load", "p_user_import", "p_apikey_admin", "p_data_read"},
	}
	viewer := e.key("viewer", keySpec{perms: sets["viewer"], readOnly: true})
	runner := e.key("runner_set", keySpec{perms: sets["runner"]})
	loader := e.key("loader", keySpec{perms: sets["loader"]})
	manager := e.key("manager", keySpec{perms: sets["manager"]})
	status := func(r reply) int { return r.status }
	loaded := func(r reply) string {
		m := object(t, r, 200)
		return fmt.Sprintf("created %v updated %v errors %v", m["created"], m["updated"], m["errors"])
	}

	t.Run("read-only viewer reads and changes nothing", func(t *testing.T) {
		for _, p := range []string{"/api/schemas/", "/api/pipelines/", "/api/instances/server/", "/api/instances/server/s1/"} {
			if got := status(e.get(p, viewer)); got != 200 {
				t.Fatalf("GET %s: %d", p, got)
			}
		}
		if got := status(e.post("/api/load/", viewer, []byte("- {classname: server, keyname: v1}\n"))); got != 403 {
			t.Fatalf("load: %d", got)
		}
		// As the page says: keys are out of reach, users are readable without passwords.
		if got := status(e.get("/api/instances/_apikey/", viewer)); got != 403 {
			t.Fatalf("GET keys: %d", got)
		}
		if r := e.get("/api/instances/_user/admin/", viewer); r.status != 200 || strings.Contains(string(r.body), "password") {
			t.Fatalf("GET a user: %d %s", r.status, r.body)
		}
		if got := status(e.post("/api/pipelines/upper/?schema=server", viewer, nil)); got != 403 {
			t.Fatalf("run: %d", got)
		}
	})
	t.Run("pipeline runner runs an updating pipeline without errors", func(t *testing.T) {
		rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", runner, nil))
		d := e.pollTask("/api/tasks/"+rr.Handle+"/", runner)
		res := d["result"].(map[string]any)
		if d["status"] != "succeeded" || fmt.Sprint(res["errors"]) != "0" || fmt.Sprint(res["updated"]) == "0" {
			t.Fatalf("task %v result %v", d["status"], res)
		}
		if got := status(e.post("/api/load/", runner, []byte("- {classname: server, keyname: r1}\n"))); got != 403 {
			t.Fatalf("load: %d", got)
		}
	})
	t.Run("loader creates and updates by load and rawfile, cannot delete", func(t *testing.T) {
		if got := loaded(e.post("/api/load/", loader, []byte("- {classname: server, keyname: l1, hostname: x}\n- {classname: server, keyname: s1, hostname: y}\n"))); got != "created 1 updated 1 errors 0" {
			t.Fatalf("load: %s", got)
		}
		if got := loaded(e.post("/api/rawfile/?schema=server&delimiter=,", loader, []byte("keyname,hostname\nl2,z\n"))); got != "created 1 updated 0 errors 0" {
			t.Fatalf("rawfile: %s", got)
		}
		m := object(t, e.post("/api/load/", loader, []byte("- {classname: server, keyname: l1, _action: delete}\n")), 200)
		if fmt.Sprint(m["errors"]) != "1" {
			t.Fatalf("delete by loader: %v", m)
		}
	})
	t.Run("user manager grants what it holds, not more", func(t *testing.T) {
		ok := "- {classname: _user, keyname: carol}\n- {classname: _role, keyname: role_readers, permissions: [p_data_read], users: [carol]}\n"
		if got := loaded(e.post("/api/load/", manager, []byte(ok))); got != "created 2 updated 0 errors 0" {
			t.Fatalf("load: %s", got)
		}
		bad := "- {classname: _role, keyname: role_deleters, permissions: [p_data_delete], users: [carol]}\n"
		if got := loaded(e.post("/api/load/", manager, []byte(bad))); got != "created 0 updated 0 errors 1" {
			t.Fatalf("granting a permission it lacks: %s", got)
		}
	})
}
