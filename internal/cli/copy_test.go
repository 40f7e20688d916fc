package cli

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// copiedTables are the tables a copy must carry over, compared row by row.
var copiedTables = []string{"registry", "configuration", "permissions", "schemas", "schema_fields", "instances",
	"revisions", "sessions", "tasks", "node_salt", "schema_generation", "instance_counts", "instance_ids", "ipam_blocks"}

// dumpTables reads every row of copiedTables from the database at addr (any engine),
// each row as text in a stable order, leaving out the engines' own row-order column.
func dumpTables(t *testing.T, addr string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, addr, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", store.RedactURL(addr), err)
	}
	defer db.Close()
	out := map[string][]string{}
	for _, table := range copiedTables {
		cols, rows := testkit.Rows(t, testkit.Pool(db.Reader()), "SELECT * FROM "+table)
		for _, r := range rows {
			var b strings.Builder
			for i, v := range r {
				if cols[i] == "row_order" {
					continue
				}
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s=%T:%v|", cols[i], v, v)
			}
			out[table] = append(out[table], b.String())
		}
		// Sorted here, not by the engine: collations order text differently.
		sortStrings(out[table])
	}
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// copySource makes a SQLite database with rows in every table a copy moves.
func copySource(t *testing.T) string {
	t.Helper()
	env := testEnv(t)
	env["SERVICE_DB"] = filepath.Join(t.TempDir(), "source.db")
	migrateDB(t, env)
	loadDoc(t, env, `
- {classname: _schema, keyname: box, note: {dataformat: string}, size: {dataformat: int}}
- {classname: _pipeline, keyname: append_x, content: "- field_append: ['', note, X]"}
- {classname: box, keyname: b1, displayname: "Box One", note: "Grüße \"quoted\" text", size: 3}
- {classname: box, keyname: b2, note: "second", size: 4}
- {classname: box, keyname: gone, note: "to delete"}
`)
	ctx := context.Background()
	db, err := testkit.OpenStore(t, env["SERVICE_DB"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	insertInstances(t, db, "box", "many", 1200, func(i int) map[string]any { return map[string]any{"note": fmt.Sprintf("n%d", i), "size": i} })
	testkit.Exec(t, db, "DELETE FROM instances WHERE keyname = 'gone'")
	if _, _, err := db.CreateSession(ctx, 1, "admin", "127.0.0.1", db.ConsoleSessionLimits(ctx)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if code, _, stderr := runCLI(t, env, "pipeline", "run", "append_x", "--schema", "box"); code != 0 {
		t.Fatalf("pipeline run: %s", stderr)
	}
	return env["SERVICE_DB"]
}

// TestCopyBetweenEnginesKeepsEveryRow copies a SQLite database to PostgreSQL and back,
// and to another SQLite file: every table holds the same rows at the end, the
// PostgreSQL copy numbers new rows past the copied ids, the SQLite copy's search
// finds copied instances, and a second copy into the filled database is refused,
// naming what it holds. The password of a URL never shows.
func TestCopyBetweenEnginesKeepsEveryRow(t *testing.T) {
	pg := testkit.NewPostgresAddress(t)
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "copy-pw-must-not-show"
	u.User = url.UserPassword(u.User.Username(), secret) // the test cluster trusts local connections
	pg = u.String()
	src := copySource(t)
	want := dumpTables(t, src)
	if len(want["instances"]) < 1200 || len(want["sessions"]) != 1 || len(want["tasks"]) != 1 || len(want["revisions"]) == 0 {
		t.Fatalf("the source lacks rows: %d instances, %d sessions, %d tasks, %d revisions",
			len(want["instances"]), len(want["sessions"]), len(want["tasks"]), len(want["revisions"]))
	}
	env := testEnv(t)

	code, out, stderr := runCLI(t, env, "copy", "--from", src, "--to", pg)
	if code != 0 {
		t.Fatalf("copy to PostgreSQL: exit %d: %s", code, stderr)
	}
	if strings.Contains(out+stderr, secret) {
		t.Fatalf("the password shows:\n%s%s", out, stderr)
	}
	for _, line := range []string{"instances", "tasks", "sessions", "revisions", "copied "} {
		if !strings.Contains(out, line) {
			t.Fatalf("no %q line in the report:\n%s", line, out)
		}
	}
	if got := dumpTables(t, pg); !reflect.DeepEqual(got, want) {
		t.Fatalf("PostgreSQL's rows differ from the source's:\n%s", diffTables(want, got))
	}

	// The indexes dropped while the copy filled a table are back, as the layout has them.
	if db, err := store.Open(context.Background(), pg, store.Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	} else {
		n := testkit.QueryInt(t, testkit.Pool(db.Reader()), `SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema()
			AND indexname IN ('instances_search', 'instances_classname_id', 'revisions_object', 'revisions_class', 'sessions_user', 'tasks_row_order', 'tasks_status', 'tasks_owner')`)
		db.Close()
		if n != 8 {
			t.Fatalf("%d of the 8 layout indexes after the copy", n)
		}
	}

	back := filepath.Join(t.TempDir(), "back.db")
	if code, _, stderr := runCLI(t, env, "copy", "--from", pg, "--to", back); code != 0 {
		t.Fatalf("copy to SQLite: exit %d: %s", code, stderr)
	} else if strings.Contains(stderr, secret) {
		t.Fatalf("the password shows: %s", stderr)
	}
	if got := dumpTables(t, back); !reflect.DeepEqual(got, want) {
		t.Fatalf("the copy back's rows differ from the source's:\n%s", diffTables(want, got))
	}
	file := filepath.Join(t.TempDir(), "file.db")
	if code, _, stderr := runCLI(t, env, "copy", "--from", src, "--to", file); code != 0 {
		t.Fatalf("copy SQLite to SQLite: exit %d: %s", code, stderr)
	}
	if got := dumpTables(t, file); !reflect.DeepEqual(got, want) {
		t.Fatalf("the file copy's rows differ from the source's:\n%s", diffTables(want, got))
	}

	code, out, stderr = runCLI(t, env, "copy", "--from", src, "--to", pg)
	if code != 1 || !strings.Contains(stderr, "not empty") || !strings.Contains(stderr, "instances: ") || !strings.Contains(stderr, "registry: ") {
		t.Fatalf("a copy into the filled database: exit %d, %s%s", code, out, stderr)
	}
	if strings.Contains(out+stderr, secret) {
		t.Fatalf("the password shows:\n%s%s", out, stderr)
	}
	if got := dumpTables(t, pg); !reflect.DeepEqual(got, want) {
		t.Fatalf("the refused copy changed the target:\n%s", diffTables(want, got))
	}

	// New rows on the PostgreSQL copy take ids past the copied ones; the SQLite copy
	// searches its copied instances.
	ctx := context.Background()
	for _, addr := range []string{pg, back} {
		db, err := testkit.OpenStore(t, addr, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		testkit.MustLoad(t, db, `
- {classname: _schema, keyname: later, n: {dataformat: int}}
- {classname: box, keyname: b3, note: "after the copy"}
`, store.LoadOptions{})
		s, err := db.Schema(ctx, "box")
		if err != nil {
			t.Fatal(err)
		}
		found, n, err := db.SearchInstances(ctx, s, "Grüße", 0, 10)
		if err != nil || n != 1 || found[0].Keyname != "b1" {
			t.Fatalf("%s: search after the copy: %v, %d found", store.RedactURL(addr), err, n)
		}
		db.Close()
	}
}

// diffTables names the tables whose rows differ, with a first differing row.
func diffTables(want, got map[string][]string) string {
	var b strings.Builder
	for _, table := range copiedTables {
		w, g := want[table], got[table]
		if reflect.DeepEqual(w, g) {
			continue
		}
		fmt.Fprintf(&b, "%s: %d rows, want %d\n", table, len(g), len(w))
		for i := range min(len(w), len(g)) {
			if w[i] != g[i] {
				fmt.Fprintf(&b, "  got  %s\n  want %s\n", g[i], w[i])
				break
			}
		}
	}
	return b.String()
}

// TestCopyNeedsBothEnds: a copy without --from or --to is a usage error; a missing
// source is refused and creates nothing.
func TestCopyNeedsBothEnds(t *testing.T) {
	env := testEnv(t)
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, env, "copy", "--to", filepath.Join(dir, "x.db")); code != 2 || !strings.Contains(stderr, "--from and --to") {
		t.Fatalf("no --from: exit %d, %s", code, stderr)
	}
	code, _, stderr := runCLI(t, env, "copy", "--from", filepath.Join(dir, "missing.db"), "--to", filepath.Join(dir, "x.db"))
	if code != 1 || !strings.Contains(stderr, "missing.db") {
		t.Fatalf("missing source: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused copy created the target: %v", err)
	}
}

// TestCopyFromPostgresFoldsPendingCounts: rows a PostgreSQL database's owner wrote
// with SQL outside the service leave their count changes noted but not yet folded
// into the counts (the next store commit folds them); a copy from that database
// carries the counts as the fold gives them, so the target counts every instance.
func TestCopyFromPostgresFoldsPendingCounts(t *testing.T) {
	env := testEnv(t)
	env["SERVICE_DB"] = testkit.NewPostgresAddress(t)
	migrateDB(t, env)
	loadDoc(t, env, `
- {classname: _schema, keyname: box, note: {dataformat: string}}
- {classname: box, keyname: b1, note: one}
- {classname: box, keyname: b2, note: two}
- {classname: box, keyname: b3, note: three}
`)
	raw, err := sql.Open("pgx", env["SERVICE_DB"])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{
		`INSERT INTO instances(id, classname, keyname, data, created_at, updated_at)
			SELECT max(id) + 1, 'box', 'by-sql', '{}', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z' FROM instances`,
		`DELETE FROM instances WHERE id = (SELECT max(id) FROM instances)`,
		`DELETE FROM instances WHERE keyname = 'b1'`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var pending int
	if err := raw.QueryRow("SELECT (SELECT count(*) FROM instance_count_deltas) + (SELECT count(*) FROM instance_id_deletes)").Scan(&pending); err != nil || pending == 0 {
		t.Fatalf("no count change waits for a fold (%d, %v): the test proves nothing", pending, err)
	}
	var high int
	if err := raw.QueryRow("SELECT max(id) FROM instance_id_deletes").Scan(&high); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "copy.db")
	if code, _, stderr := runCLI(t, env, "copy", "--from", env["SERVICE_DB"], "--to", file); code != 0 {
		t.Fatalf("copy: exit %d: %s", code, stderr)
	}
	db, err := testkit.OpenStore(t, file, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := testkit.QueryInt(t, db, "SELECT n FROM instance_counts WHERE classname = 'box'"); n != 2 {
		t.Errorf("the copy counts %d box instances, the source holds 2", n)
	}
	if got := testkit.QueryInt(t, db, "SELECT high FROM instance_ids"); got != high {
		t.Errorf("the copy's id high-water mark is %d, the source's deleted id %d", got, high)
	}
}
