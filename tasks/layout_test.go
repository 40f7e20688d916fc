package tasks_test

import (
	"compress/gzip"
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// oldTask is the finished task each old-layout fixture holds.
const oldTask = "0b6e8f0e-5a43-4a0f-9d1c-4c1f3f0a8f11"

// unpack writes the gzipped fixture testdata/name to a file in tb.TempDir().
func unpack(tb testing.TB, name string) string {
	tb.Helper()
	in, err := os.Open(filepath.Join("testdata", name+".db.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	z, err := gzip.NewReader(in)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), name+".db")
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, z); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// tasksLayout is the SQL of the tasks table and its indexes as the file at path
// records it, read without store (which would bring the layout up to date).
func tasksLayout(tb testing.TB, path string) string {
	tb.Helper()
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		tb.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query("SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'tasks' ORDER BY type, name")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var typ, name string
		var text sql.NullString
		if err := rows.Scan(&typ, &name, &text); err != nil {
			tb.Fatal(err)
		}
		b.WriteString(typ + " " + name + ": " + text.String + "\n")
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return b.String()
}

func TestTasksTableLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Files made by earlier releases, whose store layout created the tasks table:
	// layout 2 (f8ac543) and layout 4 (11f92f6), each holding one finished task.
	fixtures := []string{"layout2-f8ac543", "layout4-11f92f6"}
	if testkit.Postgres() {
		t.Run("a new database gets the tasks table as released, and row_order", func(t *testing.T) {
			db := openDB(t, testkit.NewAddress(t, "new.db"))
			if got, want := queryInt(t, db, "SELECT version FROM layout_versions WHERE owner = 'tasks'"), 1; got != want {
				t.Fatalf("tasks layout version: got %d, want %d", got, want)
			}
			got := testkit.QueryString(t, db, `SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position)
				FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'tasks'`)
			want := "handle text, kind text, params text, auth text, owner_type text, owner_id text, status text, " +
				"progress_total integer, progress_done integer, checkpoint text, result text, error text, created_at text, " +
				"started_at text, finished_at text, cancel_requested integer, lease_owner text, lease_until text, row_order bigint"
			if got != want {
				t.Fatalf("tasks columns:\n%s\nwant\n%s", got, want)
			}
		})
	}
	t.Run("files of earlier releases and a new file", func(t *testing.T) {
		testkit.SQLiteOnly(t, "the fixtures are SQLite files of releases before PostgreSQL, and the layout is read from sqlite_master")
		sqliteTasksLayout(t, fixtures)
	})
	t.Run("a newer tasks layout is refused, also read-only", func(t *testing.T) {
		path := testkit.NewAddress(t, "newer.db")
		db, err := testkit.OpenStore(t, path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		testkit.Exec(t, db, "UPDATE layout_versions SET version = 99 WHERE owner = 'tasks'")
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{false, true} {
			db, err := store.Open(ctx, path, store.Options{ReadOnly: ro})
			if err == nil {
				db.Close()
				t.Fatalf("read-only %v: open a newer tasks layout: got no error", ro)
			}
			if !strings.Contains(err.Error(), "of tasks") {
				t.Fatalf("read-only %v: error %q does not name the tasks layout", ro, err)
			}
		}
	})
}

// sqliteTasksLayout: files made by earlier releases keep their tasks and their table
// when opened, and a new file gets the tasks table exactly as released.
func sqliteTasksLayout(t *testing.T, fixtures []string) {
	ctx := context.Background()
	released := tasksLayout(t, unpack(t, fixtures[0]))
	if !strings.Contains(released, "table tasks: CREATE TABLE tasks") || !strings.Contains(released, "index tasks_owner") {
		t.Fatalf("fixture %s has no tasks table:\n%s", fixtures[0], released)
	}
	for _, name := range fixtures {
		t.Run("a file made by "+name+" opens and keeps its tasks and table", func(t *testing.T) {
			path := unpack(t, name)
			before := tasksLayout(t, path)
			if before != released {
				t.Fatalf("fixture layouts differ:\n%s\nvs\n%s", before, released)
			}
			db := openDB(t, path)
			r := tasks.New(db, tasks.Options{})
			task, err := r.Get(ctx, oldTask)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := task.Status, tasks.StatusSucceeded; got != want {
				t.Fatalf("status: got %s, want %s", got, want)
			}
			if got, want := task.Pipeline, "tidy"; got != want {
				t.Fatalf("pipeline: got %s, want %s", got, want)
			}
			if task.Result == nil || task.Result.Updated != 1 || task.Result.Unchanged != 2 {
				t.Fatalf("result: got %+v, want updated 1, unchanged 2", task.Result)
			}
			if got, want := queryInt(t, db, "SELECT version FROM layout_versions WHERE owner = 'tasks'"), 1; got != want {
				t.Fatalf("tasks layout version: got %d, want %d", got, want)
			}
			if got := tasksLayout(t, path); got != before {
				t.Fatalf("opening changed the tasks table:\n%s\nwant\n%s", got, before)
			}
		})
	}
	t.Run("a new file gets the tasks table exactly as released", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "new.db")
		db := openDB(t, path)
		if got, want := queryInt(t, db, "SELECT version FROM layout_versions WHERE owner = 'tasks'"), 1; got != want {
			t.Fatalf("tasks layout version: got %d, want %d", got, want)
		}
		if got := tasksLayout(t, path); got != released {
			t.Fatalf("new tasks table:\n%s\nwant\n%s", got, released)
		}
	})
}
