package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// classEntry is a valid entry of each class the permission table covers.
func classEntry(cls, key string) map[string]any {
	m := map[string]any{"classname": cls, "keyname": key}
	switch cls {
	case "_pipeline":
		m["content"] = "- field_noop:"
	case "_dataview":
		m["target_class"] = "server"
	case "_role", "_apikey":
		m["permissions"] = []string{}
	case "_eventrule":
		m["schemas"] = []string{"server"}
		m["webhook_url"] = "http://192.0.2.1/hook"
		m["secret"] = "s3cret-for-signing"
	case "_schedule":
		m["pipeline"] = "bulk_delete_disabled"
		m["schemas"] = []string{"server"}
		m["cron"] = "@hourly"
	}
	return m
}

func loadBody(t *testing.T, entries ...map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPermissionTableThroughLoad: for every class of the permission table and a user
// schema, for credentials holding the class permission or only the p_data_*
// permissions, each action is allowed exactly when the table says so, through POST
// /api/load/. The table is the code's; the docs must list the same one.
func TestPermissionTableThroughLoad(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	table := model.ClassPermissions()
	table["server"] = "" // a user schema: the p_data_* permissions govern it
	data := []string{"p_data_admin", "p_data_create", "p_data_update", "p_data_delete", "p_data_read"}
	var classes []string
	for cls := range table {
		classes = append(classes, cls)
	}
	sort.Strings(classes)
	n := 0
	for _, cls := range classes {
		perm := table[cls]
		creds := map[string][]string{"data_perms": data}
		if perm != "" {
			creds["class_perm"] = []string{perm}
		}
		if cls == "_eventrule" {
			// A rule watches a schema its author may read.
			creds["class_perm"] = append(creds["class_perm"], "p_data_read")
		}
		if cls == "_schedule" {
			// A schedule's writer must be able to run its pipeline over its schemas.
			creds["class_perm"] = append(creds["class_perm"], "p_pipeline_run", "p_data_read", "p_data_update")
		}
		for credName, perms := range creds {
			key := e.key(fmt.Sprintf("tbl_%s_%s", strings.TrimPrefix(cls, "_"), credName),
				keySpec{perms: append([]string{"p_api_load"}, perms...)})
			allowed := perm == "" || credName == "class_perm"
			for _, action := range []string{"create", "update", "delete"} {
				n++
				name := fmt.Sprintf("tblobj%d", n)
				if action != "create" {
					b, _ := json.Marshal([]any{classEntry(cls, name)})
					e.load(string(b))
				}
				ent := classEntry(cls, name)
				ent["_action"] = action
				if action == "update" {
					ent["displayname"] = "changed"
				}
				t.Run(fmt.Sprintf("%s %s by %s", action, cls, credName), func(t *testing.T) {
					res := decodeLoad(t, e.post("/api/load/", key, loadBody(t, ent)))
					done := res.Created + res.Updated + res.Deleted
					if allowed && (done != 1 || res.Errors != 0) {
						t.Fatalf("allowed by the table, got %+v", res)
					}
					if !allowed && (done != 0 || res.Errors != 1 || !strings.Contains(res.Messages[0].Message, "permission denied")) {
						t.Fatalf("refused by the table, got %+v", res)
					}
				})
			}
		}
	}
}

// TestPermissionDocsMatchTable: docs/permissions.md lists the code's class table and
// every built-in permission.
func TestPermissionDocsMatchTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/permissions.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(_[a-z]+)` \\| `(p_[a-z_]+)` \\|")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		got[m[1]] = m[2]
	}
	want := model.ClassPermissions()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("docs/permissions.md class table:\n%v\ncode:\n%v", got, want)
	}
	builtin, err := os.ReadFile("../builtin/init/00_permission.yml")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, m := range regexp.MustCompile(`keyname: (p_[a-z_]+)`).FindAllStringSubmatch(string(builtin), -1) {
		names = append(names, m[1])
	}
	for _, p := range store.CodePermissions() {
		names = append(names, p.Keyname)
	}
	for _, name := range names {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/permissions.md does not describe %s", name)
		}
	}
}
