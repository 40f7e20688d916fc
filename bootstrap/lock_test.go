package bootstrap_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/internal/testkit"
	"dataservice/store"
)

// helperEnv names the database a helper process starts on.
const helperEnv = "BOOTSTRAP_TEST_HELPER_DB"

// TestHelperProcess is not a test: TestConcurrentStartsBootstrapOnce runs the test
// binary again with this test selected and helperEnv set. The helper opens the shared
// file, prints "ready", waits until its stdin closes (so all helpers run the start-up
// sequence at the same moment), then runs it, logging JSON to stdout.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper process of TestConcurrentStartsBootstrapOnce")
	}
	ctx := context.Background()
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	db, err := testkit.OpenStore(t, path, store.Options{Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stdout, "ready")
	io.Copy(io.Discard, os.Stdin)
	err = bootstrap.Run(ctx, testkit.Migrator(t, db), bootstrap.Options{Version: testVersion, VersionDate: testVersionDate,
		Init: builtin.Init(), Logger: logger})
	db.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// jsonRecords parses the JSON log lines of a helper's output.
func jsonRecords(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

func TestConcurrentStartsBootstrapOnce(t *testing.T) {
	t.Parallel()
	// Five nodes start together on one new, empty database: a file the helpers
	// share, or one PostgreSQL database on the kit's PostgreSQL pass.
	path := testkit.NewAddress(t, "shared.db")
	const n = 5
	cmds := make([]*exec.Cmd, n)
	stdins := make([]io.WriteCloser, n)
	outs := make([]*bytes.Buffer, n)
	errs := make([]*bytes.Buffer, n)
	readers := make([]*bufio.Reader, n)
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+path)
		outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stderr = errs[i]
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i], stdins[i], readers[i] = cmd, w, bufio.NewReader(stdout)
	}
	for i, r := range readers {
		// Opening may log (a node waiting for another's layout steps) before "ready".
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("helper %d: no ready line: %v (stderr: %s)", i, err, errs[i])
			}
			if line == "ready\n" {
				break
			}
			outs[i].WriteString(line)
		}
	}
	for _, w := range stdins {
		w.Close() // every helper has the file open: let them all start
	}
	for i, r := range readers {
		if _, err := io.Copy(outs[i], r); err != nil {
			t.Fatalf("helper %d output: %v", i, err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\nstderr: %s\nstdout: %s", i, err, errs[i], outs[i])
		}
	}

	bootstrapped, blocks := 0, 0
	var seen []string // INSTANCE_UUID each helper read at its start
	for i := range n {
		t.Logf("helper %d:\n%s", i, outs[i])
		recs := jsonRecords(t, outs[i].Bytes())
		boot := 0
		for _, r := range recs {
			switch r["msg"] {
			case "bootstrap: empty database, loading built-in definitions":
				boot++
			case "migration block start":
				blocks++
			case "start-up":
				seen = append(seen, fmt.Sprint(r["instance_uuid"]))
			}
		}
		if boot > 0 {
			bootstrapped++
		}
	}
	db := openDB(t, path)
	reg := registry(t, db)
	uid := reg[store.RegInstanceUUID]

	t.Run("exactly one process bootstrapped and migrated", func(t *testing.T) {
		if got, want := bootstrapped, 1; got != want {
			t.Fatalf("processes that bootstrapped = %d, want %d", got, want)
		}
		if got, want := blocks, 5; got != want {
			t.Fatalf("migration blocks run in all = %d, want %d", got, want)
		}
	})
	t.Run("the others found the INSTANCE_UUID of the first", func(t *testing.T) {
		empty, same := 0, 0
		for _, s := range seen {
			switch s {
			case "":
				empty++
			case uid:
				same++
			}
		}
		if empty != 1 || same != n-1 {
			t.Fatalf("INSTANCE_UUID seen at start = %q, want one empty and %d times %q", seen, n-1, uid)
		}
	})
	t.Run("registry is that of one complete start", func(t *testing.T) {
		if got, want := count(t, db, "SELECT count(*) FROM registry WHERE key = 'INSTANCE_UUID'"), 1; got != want {
			t.Fatalf("INSTANCE_UUID rows = %d, want %d", got, want)
		}
		if got, want := reg[store.RegDBVersion], testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
		if _, ok := reg[store.RegLastStartFailed]; ok {
			t.Fatalf("LAST_START_FAILED set")
		}
	})
	t.Run("built-ins exist exactly once", func(t *testing.T) {
		var perms, schemas, instances int
		for _, e := range builtinEntries(t) {
			switch cls, _ := e.Key(); cls {
			case "_permission":
				perms++
			case "_schema":
				schemas++
			default:
				instances++
			}
		}
		for _, c := range []struct {
			query string
			want  int
		}{
			{"SELECT count(*) FROM permissions", perms + len(store.CodePermissions())},
			{"SELECT count(*) FROM schemas", schemas + len(store.CodeClasses())},
			{"SELECT count(*) FROM instances", instances},
			{"SELECT count(*) FROM configuration", len(store.ConfigDefs)},
			{"SELECT count(*) FROM revisions", 0},
		} {
			if got := count(t, db, c.query); got != c.want {
				t.Fatalf("%s = %d, want %d", c.query, got, c.want)
			}
		}
	})
}

func TestRunWaitsForTheLock(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// The start-up lock held as another process would hold it: its own lock file
	// descriptor (SQLite) or its own session (PostgreSQL).
	unlock, err := db.LockStartup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	rec := &testkit.Recorder{}

	t.Run("start gives up when its context ends while another holds the lock", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := bootstrap.Run(ctx, testkit.Migrator(t, db), options(t, rec))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
		if got := registry(t, db); len(got) != 0 {
			t.Fatalf("registry = %v, want empty", got)
		}
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 0 {
			t.Fatalf("start ran without the lock: %+v", got)
		}
		if got := rec.Find(slog.LevelInfo, "start-up"); len(got) != 0 {
			t.Fatalf("start ran without the lock: %+v", got)
		}
	})
	t.Run("start runs once the lock is released", func(t *testing.T) {
		unlock()
		unlock = nil
		run(t, db, options(t, rec))
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
}
