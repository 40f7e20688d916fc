package cli

import (
	"context"
	"database/sql"
	"dataservice/internal/testkit"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRestoreOfABackupTakenWhileWriting takes backups while a pipeline task and API loads
// write, then restores each into a fresh location, starts a newer code version on it
// (so the start migrates), and serves it until the interrupted task is taken over and
// finishes: every copy must open, pass integrity_check, migrate and run cleanly.
//
// Serial: it sets serve's afterBatch hook, which the whole package shares.
func TestRestoreOfABackupTakenWhileWriting(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	if testing.Short() {
		t.Skip("slow: serves three restored copies")
	}
	// The pipeline is held at a batch boundary (serve's afterBatch hook) while each
	// backup is taken, so every backup catches it mid-run whatever the machine's speed.
	const total, loads, perLoad, holds = 12000, 8, 100, 6
	held, resume, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	afterBatch = func(string, int) error {
		select {
		case held <- struct{}{}:
			select {
			case <-resume:
			case <-finished:
			}
		case <-finished:
		}
		return nil
	}
	var finishOnce sync.Once
	finish := func() { finishOnce.Do(func() { close(finished) }) }
	t.Cleanup(func() { finish(); afterBatch = nil })
	env := testEnv(t)
	env["SERVICE_TASK_LEASE"] = "1s"
	if code, _, stderr := runCLI(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate: %s", stderr)
	}
	loadDoc(t, env, `
- {classname: _schema, keyname: box, note: {dataformat: string}}
- {classname: _schema, keyname: loaded, n: {dataformat: int}}
- classname: _pipeline
  keyname: append_x
  content: |
    - field_append: ['', note, X]
`)
	db := openStore(t, env["SERVICE_DB"])
	insertInstances(t, db, "box", "box", total, func(int) map[string]any { return map[string]any{"note": ""} })
	db.Close()

	api, _, stop := servingProcess(t, env)
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.SetBasicAuth("admin", "s3cret-admin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := call("POST", "/api/pipelines/append_x/?schema=box", "")
	if code != 202 {
		t.Fatalf("run: %d %s", code, body)
	}
	handle := regexp.MustCompile(`"handle":"([^"]+)"`).FindStringSubmatch(body)[1]

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for l := 0; l < loads; l++ {
			var doc strings.Builder
			for i := 0; i < perLoad; i++ {
				fmt.Fprintf(&doc, "- {classname: loaded, keyname: l%d-%d, n: %d}\n", l, i, i)
			}
			if code, body := call("POST", "/api/load/", doc.String()); code != 200 {
				t.Errorf("load %d: %d %s", l, code, body)
				return
			}
		}
	}()
	// Each backup is taken while this test holds the database's write lock, after it has
	// read the task's state under that lock: the copy then holds exactly what was read,
	// so whether it caught the pipeline mid-run does not depend on the machine's speed.
	lock, err := sql.Open("sqlite", sqliteDSN(env["SERVICE_DB"], "_pragma=busy_timeout(15000)"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	dir := t.TempDir()
	var backups []string
	var loadedAt []int // the loaded instances each backup's lock holder read
	for len(backups) < holds {
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			t.Fatalf("the pipeline reached no batch boundary in 60 s (%d backups taken)", len(backups))
		}
		conn, err := lock.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		var status string
		var done, loaded int
		if err := conn.QueryRowContext(context.Background(),
			"SELECT status, progress_done, (SELECT count(*) FROM instances WHERE classname = 'loaded') FROM tasks WHERE handle = ?",
			handle).Scan(&status, &done, &loaded); err != nil {
			t.Fatal(err)
		}
		if status != "running" || done <= 0 || done >= total {
			t.Fatalf("held at a batch boundary, the task reads %s with %d of %d done", status, done, total)
		}
		f := filepath.Join(dir, fmt.Sprintf("live-%02d.bak", len(backups)))
		if code, _, stderr := runCLI(t, env, "backup", f); code != 0 {
			t.Fatalf("backup %d: %s", len(backups), stderr)
		}
		backups = append(backups, f)
		loadedAt = append(loadedAt, loaded)
		conn.ExecContext(context.Background(), "COMMIT")
		conn.Close()
		resume <- struct{}{}
	}
	finish()
	wg.Wait()
	stop()

	for i, at := range []int{0, len(backups) / 2, len(backups) - 1} {
		b := backups[at]
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			renv := testEnv(t)
			renv["SERVICE_TASK_LEASE"] = "1s"
			renv["SERVICE_VERSION"] = "4.9.1"
			if code, out, stderr := runCLI(t, renv, "restore", b); code != 0 {
				t.Fatalf("restore %s: %s %s", b, out, stderr)
			}
			path := renv["SERVICE_DB"]
			if got := sqlText(t, path, "PRAGMA integrity_check"); got != "ok" {
				t.Fatalf("integrity: %s", got)
			}
			// The copy holds exactly the loaded instances committed when it was taken
			// (a load commits in batches, so not necessarily whole loads).
			n, _ := strconv.Atoi(sqlText(t, path, "SELECT count(*) FROM instances WHERE classname = 'loaded'"))
			if n != loadedAt[at] {
				t.Errorf("%d loaded instances in the copy, want the %d committed when it was taken", n, loadedAt[at])
			}
			status := sqlText(t, path, "SELECT status FROM tasks WHERE handle = '"+handle+"'")
			if status != "running" {
				t.Errorf("the copy holds the task %s; it was read as running under the lock the backup was taken under", status)
			}
			if code, _, stderr := runCLI(t, renv, "migrate"); code != 0 {
				t.Fatalf("migrate the restored copy: %s", stderr)
			}
			if got := sqlText(t, path, "SELECT value FROM registry WHERE key = 'DB_VERSION'"); got != "4.9.1" {
				t.Fatalf("DB_VERSION after migrating: %s", got)
			}
			// Serving the copy finishes the task the backup caught mid-run, exactly once
			// per instance.
			_, _, stopR := servingProcess(t, renv)
			deadline := time.Now().Add(60 * time.Second)
			for sqlText(t, path, "SELECT status FROM tasks WHERE handle = '"+handle+"'") != "succeeded" {
				if time.Now().After(deadline) {
					t.Fatalf("the restored task did not finish (was %s)", status)
				}
				time.Sleep(100 * time.Millisecond)
			}
			stopR()
			if got := sqlText(t, path, "SELECT count(*) FROM instances WHERE classname = 'box' AND json_extract(data, '$.note') = 'X'"); got != strconv.Itoa(total) {
				t.Errorf("%s of %d box instances carry exactly one X (task was %s in the copy)", got, total, status)
			}
			if got := sqlText(t, path, "PRAGMA integrity_check"); got != "ok" {
				t.Fatalf("integrity after serving: %s", got)
			}
		})
	}
	t.Logf("%d backups taken, each with the pipeline mid-run", len(backups))
}
