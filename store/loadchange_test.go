package store_test

import (
	"strings"
	"testing"

	"dataservice/store"
)

func TestLoadOnChangeReportsDryRunChanges(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	seedServers(t, db)
	mustLoad(t, db, `- {classname: _user, keyname: olivia, password: first-pass-1, email: o@example.org}`, store.LoadOptions{})
	revs := queryInt(t, db, "SELECT count(*) FROM revisions")
	hash := queryString(t, db, "SELECT data FROM instances WHERE classname = '_user' AND keyname = 'olivia'")

	var got []store.Revision
	res := load(t, db, `
- {classname: server, keyname: srv1, port: 8080}
- {classname: server, keyname: srv9, hostname: new}
- {classname: server, keyname: srv1, _action: noop}
- {classname: _user, keyname: olivia, password: second-pass-2}
`, store.LoadOptions{DryRun: true, OnChange: func(r store.Revision) { got = append(got, r) }})
	if got, want := counts(res), "created=1 updated=2 unchanged=0 deleted=0 enabled=0 disabled=0 skipped=1 errors=0"; got != want {
		t.Fatalf("counts: got %s, want %s (%s)", got, want, messages(res))
	}
	if len(got) != 3 {
		t.Fatalf("observed %d changes, want 3: %+v", len(got), got)
	}
	if r := got[0]; r.Classname != "server" || r.Keyname != "srv1" || !strings.Contains(r.Before, `"port":80`) ||
		!strings.Contains(r.After, `"port":8080`) || r.Author != "system" {
		t.Fatalf("first change: %+v", r)
	}
	if r := got[1]; r.Keyname != "srv9" || r.Before != "" || !strings.Contains(r.After, `"hostname":"new"`) {
		t.Fatalf("second change: %+v", r)
	}
	r := got[2]
	if r.Classname != "_user" || strings.Contains(r.Before+r.After, "second-pass-2") || strings.Contains(r.Before+r.After, "$argon2") ||
		!strings.Contains(r.After, "********") {
		t.Fatalf("a password change must be reported masked: %+v", r)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM revisions"); n != revs {
		t.Fatalf("a dry run wrote %d revisions", n-revs)
	}
	if h := queryString(t, db, "SELECT data FROM instances WHERE classname = '_user' AND keyname = 'olivia'"); h != hash {
		t.Fatalf("a dry run changed the user: %s", h)
	}
	absent(t, db, "server", "srv9")
}
