package store

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// heldByOther reports whether some open file other than this test's holds the
// turnstile of the database at path.
func heldByOther(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path+"-wait", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// A writer that had to wait for the write lock gets it before the holder's next
// transaction: the holder, back at BEGIN, waits at the turnstile. Two handles on one
// file stand for two processes (each has its own turnstile file and connection).
func TestTurnstileGivesAWaitingWriterItsTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "turn.db")
	server, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	cli, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	batch, err := server.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	cliTx := make(chan *Tx, 1)
	go func() {
		tx, err := cli.Begin(ctx)
		if err != nil {
			t.Error(err)
			close(cliTx)
			return
		}
		order <- "cli"
		cliTx <- tx
	}()
	// The CLI waits for the write lock holding the turnstile.
	for deadline := time.Now().Add(10 * time.Second); !heldByOther(t, path); {
		if time.Now().After(deadline) {
			t.Fatal("the waiting writer does not hold the turnstile")
		}
		time.Sleep(time.Millisecond)
	}
	// The server ends its batch and begins the next at once, as a batched writer does.
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	next := make(chan *Tx, 1)
	go func() {
		tx, err := server.Begin(ctx)
		if err != nil {
			t.Error(err)
			close(next)
			return
		}
		order <- "server"
		next <- tx
	}()
	tx := <-cliTx
	if tx == nil {
		t.FailNow()
	}
	if first := <-order; first != "cli" {
		t.Fatalf("%s began first, want the waiting CLI", first)
	}
	if _, err := tx.execContext(ctx, "UPDATE schema_generation SET generation = generation"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	stx := <-next
	if stx == nil {
		t.FailNow()
	}
	stx.Rollback()
	if heldByOther(t, path) {
		t.Fatal("the turnstile is still held after both writers began")
	}
}

// The kernel releases a turnstile whose holder is gone (a process that died): closing
// the file stands for the exit.
func TestTurnstileReleasedWithItsHolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gone.db")
	a := openTurnstile(path, nil)
	if _, err := a.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !heldByOther(t, path) {
		t.Fatal("entered turnstile not held")
	}
	a.close()
	if heldByOther(t, path) {
		t.Fatal("turnstile still held after its holder closed it")
	}
	// A waiter whose context ends stops waiting, holding nothing.
	b := openTurnstile(path, nil)
	defer b.close()
	leave, _ := b.enter(context.Background())
	c := openTurnstile(path, nil)
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.enter(ctx); err == nil {
		t.Fatal("entered a turnstile held by another")
	}
	leave()
	if _, err := c.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkTurnstile is the turnstile's cost for each write transaction: an empty
// write transaction begun and rolled back with and without it, and the turnstile's
// enter and leave alone. A load of n entries begins about n/1000 transactions.
func BenchmarkTurnstile(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	turn := db.turn
	tx := func(b *testing.B) {
		for b.Loop() {
			tx, err := db.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			tx.Rollback()
		}
	}
	b.Run("tx", func(b *testing.B) { db.turn = turn; tx(b) })
	b.Run("tx-without-turnstile", func(b *testing.B) { db.turn = nil; tx(b) })
	db.turn = turn
	b.Run("enter-leave", func(b *testing.B) {
		for b.Loop() {
			leave, err := turn.enter(ctx)
			if err != nil {
				b.Fatal(err)
			}
			leave()
		}
	})
}

// A process whose goroutines queue for its writer connection without pause still lets
// another process's writer in: a goroutine takes the turnstile only once it has the
// connection, so the turnstile is free while the process waits for itself.
//
// Serial: its wait is bounded by wall time, which parallel tests would stretch.
func TestTurnstileNotHeldWhileQueuedInProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	server, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	other, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	stop := make(chan struct{})
	finished := make(chan struct{})
	const writers = 4
	for i := 0; i < writers; i++ {
		go func() {
			defer func() { finished <- struct{}{} }()
			for n := 0; n < 2000; n++ { // bounded: at most 2000 × 20 ms
				select {
				case <-stop:
					return
				default:
				}
				tx, err := server.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(20 * time.Millisecond) // a batch holding the writer
				tx.Commit()
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the writers queue
	start := time.Now()
	tx, err := other.Begin(ctx)
	took := time.Since(start)
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	for i := 0; i < writers; i++ {
		<-finished
	}
	// Expected: a batch or two (20–40 ms); ten times a second is the bound.
	if took > 10*time.Second {
		t.Fatalf("the other process's writer waited %v", took)
	}
	t.Logf("the other process's writer waited %v", took)
}

// A turnstile file the process cannot open (made by another user; here a directory in
// its place) does not stop the database from opening or writing: the process writes
// without the turnstile and warns.
func TestTurnstileUnavailableWarns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "odd.db")
	if err := os.Mkdir(path+"-wait", 0o700); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	db, err := Open(ctx, path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.WithTx(ctx, func(tx *Tx) error {
		_, err := tx.execContext(ctx, "UPDATE schema_generation SET generation = generation + 1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "turnstile unavailable, writing without it") {
		t.Fatalf("no warning: %s", logs.String())
	}
}

// lockedBuffer is a log destination safe for the goroutines of an open database.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// touch runs one write transaction on db, bounded by limit.
func touch(db *DB, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return db.WithTx(ctx, func(tx *Tx) error {
		_, err := tx.execContext(ctx, "UPDATE schema_generation SET generation = generation + 1")
		return err
	})
}

// heldTurnstile opens a database in a temporary directory, logging to logs, with
// a second open file of its turnstile: hold takes that file's flock (flock locks
// belong to the open file, so this process then waits for it as for another
// process's), release lets it go.
func heldTurnstile(t *testing.T, name string) (db *DB, logs *lockedBuffer, hold, release func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	logs = new(lockedBuffer)
	db, err := Open(context.Background(), path, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	holder, err := os.Open(path + "-wait")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	hold = func() {
		if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
	}
	release = func() { syscall.Flock(int(holder.Fd()), syscall.LOCK_UN) }
	return db, logs, hold, release
}

// A turnstile held and never released (a process stopped with Ctrl-Z while it waited)
// costs one long wait, not one per transaction: after the first timeout each write
// tries the turnstile for the short stuck wait only (at least that long, and within
// ten times it), with one warning, until the turnstile is free again; a new stop is a
// new episode. A second open file in this process holds the flock (flock locks
// belong to the open file).
//
// Serial: its wait is bounded by wall time, which parallel tests would stretch.
func TestTurnstileStuckHolderWaitedForOncePerEpisode(t *testing.T) {
	db, logs, hold, release := heldTurnstile(t, "stuck.db")
	const short = 100 * time.Millisecond
	warnings := func() int { return strings.Count(logs.String(), "turnstile held too long") }

	for episode := 1; episode <= 2; episode++ {
		hold()
		db.turn.wait = short
		start := time.Now()
		if err := touch(db, time.Minute); err != nil {
			t.Fatalf("episode %d: first write: %v", episode, err)
		}
		if took := time.Since(start); took < short {
			t.Fatalf("episode %d: the first write waited %v, less than the timeout", episode, took)
		}
		if warnings() != episode {
			t.Fatalf("episode %d: %d warnings, want %d: %s", episode, warnings(), episode, logs.String())
		}
		// Were the following writes to wait the long wait again, they would wait an
		// hour: each is bounded to 5 s and waits the stuck wait only.
		db.turn.wait = time.Hour
		for i := 0; i < 3; i++ {
			start := time.Now()
			if err := touch(db, 5*time.Second); err != nil {
				t.Fatalf("episode %d: write %d after the timeout waited again: %v", episode, i+2, err)
			}
			if took := time.Since(start); took < turnstileStuckWait || took > 10*turnstileStuckWait {
				t.Fatalf("episode %d: write %d while stuck took %v, want the stuck wait (%v)", episode, i+2, took, turnstileStuckWait)
			}
		}
		if warnings() != episode {
			t.Fatalf("episode %d: %d warnings after more writes, want one per episode", episode, warnings())
		}
		// The holder goes on: the next write takes the turnstile again.
		release()
		if err := touch(db, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(logs.String(), "turnstile free again"); n != episode {
			t.Fatalf("episode %d: %d notes that the turnstile is free again: %s", episode, n, logs.String())
		}
		if db.turn.stuck {
			t.Fatalf("episode %d: still stuck after the turnstile was taken", episode)
		}
	}
}

// Once the turnstile is stuck, a holder that releases it soon (a live process that
// took it while it waited for our write lock, and lets go once it has the lock) is
// waited for: the next write takes the turnstile and the episode ends, instead of
// going on without it and taking the write lock again before the waiter's next poll,
// which kept the waiter out and the turnstile stuck for good. The stuck wait is made
// long here so that the release, 50 ms later, always falls within it.
func TestTurnstileStuckWaitsForALiveWaiter(t *testing.T) {
	t.Parallel()
	db, logs, hold, release := heldTurnstile(t, "live.db")
	hold()
	db.turn.wait = 100 * time.Millisecond
	if err := touch(db, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !db.turn.stuck {
		t.Fatal("not stuck after the wait timed out")
	}
	db.turn.stuckWait = time.Minute
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(50 * time.Millisecond)
		release()
	}()
	if err := touch(db, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	<-released
	if db.turn.stuck {
		t.Fatal("the write went on without the turnstile its holder released 50 ms later: still stuck")
	}
	if !strings.Contains(logs.String(), "turnstile free again") {
		t.Fatalf("no note that the turnstile is free again: %s", logs.String())
	}
}

// Something other than a regular file at `<db>-wait` is not used: a FIFO (opening it
// for reading would wait forever for a writer) and a symlink (which would create or
// lock a file elsewhere). The database opens and writes without the turnstile, and
// warns.
func TestTurnstileFileNotRegularIsNotUsed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		make func(t *testing.T, wait, dir string) (check func())
	}{
		{"fifo", func(t *testing.T, wait, dir string) func() {
			if err := syscall.Mkfifo(wait, 0o600); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}},
		{"symlink", func(t *testing.T, wait, dir string) func() {
			target := filepath.Join(dir, "elsewhere")
			if err := os.Symlink(target, wait); err != nil {
				t.Fatal(err)
			}
			return func() {
				if _, err := os.Lstat(target); !os.IsNotExist(err) {
					t.Errorf("the symlink's target was created (%v)", err)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "odd.db")
			check := c.make(t, path+"-wait", dir)
			var logs lockedBuffer
			opened := make(chan error, 1)
			var db *DB
			go func() {
				var err error
				db, err = Open(context.Background(), path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				opened <- err
			}()
			select {
			case err := <-opened:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				// Let a reader blocked on the FIFO go, so the test ends.
				if f, err := os.OpenFile(path+"-wait", os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatal("open did not return within 10 s")
			}
			defer db.Close()
			if db.turn != nil {
				t.Fatalf("a turnstile on a %s", c.name)
			}
			if err := touch(db, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "turnstile unavailable, writing without it") {
				t.Fatalf("no warning: %s", logs.String())
			}
			check()
		})
	}
}
