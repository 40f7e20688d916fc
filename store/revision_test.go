package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

type revision struct {
	Classname, Keyname, Action, Before, After, Author, CreatedAt string
}

// revisions lists the revisions rows of keyname in id order.
func revisions(tb testing.TB, db *store.DB, keyname string) []revision {
	tb.Helper()
	rows, err := db.Reader().QueryContext(context.Background(), `SELECT classname, keyname, action,
		COALESCE(before, '<null>'), COALESCE(after, '<null>'), author, created_at FROM revisions WHERE keyname = ? ORDER BY id`, keyname)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []revision
	for rows.Next() {
		var r revision
		if err := rows.Scan(&r.Classname, &r.Keyname, &r.Action, &r.Before, &r.After, &r.Author, &r.CreatedAt); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

func actions(revs []revision) string {
	var a []string
	for _, r := range revs {
		a = append(a, r.Action)
	}
	return strings.Join(a, ",")
}

func TestRevisionsOnePerChange(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	alice := userAuth("p_data_admin")
	alice.Name = "alice"
	for _, doc := range []string{
		`{classname: server, keyname: r1, hostname: a}`,
		`{classname: server, keyname: r1, hostname: a}`, // unchanged: no row
		`{classname: server, keyname: r1, hostname: b}`,
		`{classname: server, keyname: r1, _action: disable}`,
		`{classname: server, keyname: r1, _action: disable}`, // unchanged: no row
		`{classname: server, keyname: r1, _action: enable}`,
		`{classname: server, keyname: r1, _action: noop}`, // no row
		`{classname: server, keyname: r1, _action: delete}`,
		`{classname: server, keyname: r1, _action: delete}`, // missing: no row
	} {
		mustLoad(t, db, doc, store.LoadOptions{Auth: alice})
	}
	revs := revisions(t, db, "r1")
	if got, want := actions(revs), "create,update,disable,enable,delete"; got != want {
		t.Fatalf("actions: got %s, want %s", got, want)
	}
	for _, r := range revs {
		if got, want := r.Author, "user:alice"; got != want {
			t.Fatalf("%s author: got %q, want %q", r.Action, got, want)
		}
		if got, want := r.Classname, "server"; got != want {
			t.Fatalf("%s classname: got %q, want %q", r.Action, got, want)
		}
		if got, want := r.CreatedAt, "2026-11-22T10:00:00Z"; got != want {
			t.Fatalf("%s created_at: got %q, want %q", r.Action, got, want)
		}
	}
	t.Run("create has no before and update records what it changed", func(t *testing.T) {
		if got, want := revs[0].Before, "<null>"; got != want {
			t.Fatalf("create before: got %s, want %s", got, want)
		}
		var before, after struct {
			Keyname   string         `json:"keyname"`
			IsEnabled bool           `json:"is_enabled"`
			Data      map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(revs[1].Before), &before); err != nil {
			t.Fatalf("update before %q: %v", revs[1].Before, err)
		}
		if err := json.Unmarshal([]byte(revs[1].After), &after); err != nil {
			t.Fatalf("update after %q: %v", revs[1].After, err)
		}
		if got, want := before.Data["hostname"].(string)+">"+after.Data["hostname"].(string), "a>b"; got != want {
			t.Fatalf("update hostname: got %s, want %s", got, want)
		}
		// A delta row: the before only the changed field's old value, the after the
		// whole object.
		if got, want := revs[1].Before+" "+revs[1].After, `{"data":{"hostname":"a"}} {"data":{"hostname":"b"},"displayname":"","is_enabled":true,"keyname":"r1"}`; got != want {
			t.Fatalf("update records: got %s, want %s", got, want)
		}
		if got, want := revs[2].Before+" "+revs[2].After, `{"is_enabled":true} {"data":{"hostname":"b"},"displayname":"","is_enabled":false,"keyname":"r1"}`; got != want {
			t.Fatalf("disable records: got %s, want %s", got, want)
		}
		var first struct {
			Keyname string `json:"keyname"`
		}
		if err := json.Unmarshal([]byte(revs[0].After), &first); err != nil || first.Keyname != "r1" {
			t.Fatalf("create after %q: the whole object, keyname r1 (%v)", revs[0].After, err)
		}
	})
	t.Run("delete has no after", func(t *testing.T) {
		if got, want := revs[4].After, "<null>"; got != want {
			t.Fatalf("delete after: got %s, want %s", got, want)
		}
		if revs[4].Before == "<null>" {
			t.Fatal("delete before: got NULL, want the deleted state")
		}
	})
}

func TestRevisionAuthor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts store.LoadOptions
		want string
	}{
		{"no credentials write as system", store.LoadOptions{}, "system"},
		{"system context writes as system", store.LoadOptions{Auth: model.SystemAuth()}, "system"},
		{"user context writes as user:LOGIN", store.LoadOptions{Auth: &model.Auth{Kind: "user", Name: "bob", All: true}}, "user:bob"},
		{"API key context writes as apikey:KEYNAME", store.LoadOptions{Auth: &model.Auth{Kind: "apikey", Name: "k9", All: true}}, "apikey:k9"},
		{"Author overrides the context", store.LoadOptions{Auth: &model.Auth{Kind: "user", Name: "bob", All: true}, Author: "task:abc123"}, "task:abc123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := newTestDB(t)
			mustLoad(t, db, serverSchema, store.LoadOptions{})
			mustLoad(t, db, `
- {classname: server, keyname: who}
- {classname: _permission, keyname: p_who}
- {classname: _schema, keyname: who, f: {dataformat: string}}
`, tt.opts)
			revs := revisions(t, db, "who")
			if got, want := len(revs), 2; got != want {
				t.Fatalf("revisions: got %d, want %d", got, want)
			}
			for _, r := range append(revs, revisions(t, db, "p_who")...) {
				if got := r.Author; got != tt.want {
					t.Fatalf("%s %s author: got %q, want %q", r.Classname, r.Action, got, tt.want)
				}
			}
		})
	}
}

func TestNoRevisions(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
		t.Fatalf("revisions after built-ins without revisions: got %d, want %d", got, want)
	}
	mustLoad(t, db, serverSchema+`
- {classname: server, keyname: quiet}
- {classname: server, keyname: quiet, hostname: h}
- {classname: server, keyname: quiet, _action: disable}
- {classname: server, keyname: quiet, _action: delete}
- {classname: _permission, keyname: p_quiet}
`, store.LoadOptions{NoRevisions: true})
	if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
		t.Fatalf("revisions: got %d, want %d", got, want)
	}
	mustLoad(t, db, `{classname: server, keyname: loud}`, store.LoadOptions{})
	if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), 1; got != want {
		t.Fatalf("revisions after a normal load: got %d, want %d", got, want)
	}
}

func TestRevisionsMaskSecrets(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `{classname: _user, login: sam, password: first-pass, email: s@example.org}`, store.LoadOptions{})
	mustLoad(t, db, `{classname: _user, login: sam, password: second-pass}`, store.LoadOptions{})
	mustLoad(t, db, `{classname: _apikey, keyname: sam, secret: key-secret}`, store.LoadOptions{})
	mustLoad(t, db, `{classname: _user, login: sam, _action: delete}`, store.LoadOptions{})
	revs := revisions(t, db, "sam")
	if got, want := actions(revs), "create,update,create,delete"; got != want {
		t.Fatalf("actions: got %s, want %s", got, want)
	}
	for _, r := range revs {
		for _, text := range []string{r.Before, r.After} {
			for _, secret := range []string{"first-pass", "second-pass", "key-secret", "argon2", "sha256"} {
				if strings.Contains(text, secret) {
					t.Fatalf("%s %s revision holds %q: %s", r.Classname, r.Action, secret, text)
				}
			}
		}
	}
	if !strings.Contains(revs[1].Before, `"password":"********"`) || !strings.Contains(revs[1].After, `"password":"********"`) {
		t.Fatalf("update revision does not mask the password: %s / %s", revs[1].Before, revs[1].After)
	}
	if !strings.Contains(revs[2].After, `"secret":"********"`) {
		t.Fatalf("API key revision does not mask the secret: %s", revs[2].After)
	}
	if !strings.Contains(revs[0].After, `"email":"s@example.org"`) {
		t.Fatalf("create revision lost a plain field: %s", revs[0].After)
	}
}
