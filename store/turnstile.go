package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// The turnstile gives a writer in another process its turn. SQLite has no queue for
// its write lock: a process that finds it taken sleeps and polls (busy_timeout), and a
// writer that commits a batch and begins the next at once takes the lock again before
// the sleeper looks, batch after batch (a one-entry CLI load waited a whole 6.6 s
// dry-run load). So every write transaction of every dataservice process passes a
// turnstile first: an exclusive flock on `<db>-wait`, taken before BEGIN IMMEDIATE and
// released as soon as BEGIN returns, i.e. once the process holds SQLite's write lock
// (or BEGIN failed). A process that has to wait for the write lock waits while holding
// the turnstile; a long batched operation (load, pipeline, re-indexing) begins each
// batch through the turnstile, so at its next batch boundary it stops until the
// waiting process has the write lock. A writer from another process therefore waits
// for at most the batch in progress (a quarter of a second) plus one busy_timeout poll.
//
// The turnstile is held only between the start of BEGIN and its end, never across a
// transaction, so it cannot deadlock with SQLite's own lock; and it is taken only once
// the process has its writer connection, so goroutines queued for that connection do
// not hold it (they would keep it taken without a pause, and the waiting process out). The kernel releases a
// flock when its process dies. A process that cannot get the turnstile within
// turnstileWait (a holder stopped with SIGSTOP or Ctrl-Z, say) goes on without it, back
// to plain busy_timeout polling, and logs a warning. It then remembers that the
// turnstile is stuck: until one attempt gets it again, each transaction tries it for
// turnstileStuckWait only and goes on, so a stopped holder costs one long wait per
// episode and a short one per transaction (each wait holds the process's only writer
// connection). Not a single attempt without waiting: when the holder resumes, a live
// process waiting for our write lock usually takes the turnstile first and keeps it
// while it polls; were we to go on at once, each BEGIN of ours would take the write
// lock again before its next poll, and the turnstile, held by that waiter, would never
// be free to us again. Waiting one poll leaves the write lock free long enough for the
// waiter to take it and release the turnstile, which our attempt then gets.

// turnstile is a process's handle on `<db>-wait`.
type turnstile struct {
	f   *os.File
	fd  int
	log *slog.Logger
	// sem admits one goroutine of this process at a time: a flock belongs to the open
	// file, so two goroutines locking the same file would both get it. (The single
	// writer connection, taken first, already admits one; sem keeps that true for any
	// caller.)
	sem chan struct{}
	// wait is how long enter waits before going on without the turnstile
	// (turnstileWait; tests shorten it); stuckWait is how long it waits once stuck
	// (turnstileStuckWait; tests change it).
	wait, stuckWait time.Duration
	// stuck is set when a wait timed out and cleared when an attempt gets the
	// turnstile again; only the goroutine holding sem reads or writes it.
	stuck bool
}

// turnstileWait is how long a writer waits for the turnstile before it goes on
// without it. A live holder waits in BEGIN only for a batch in progress (a quarter of
// a second) plus a poll; one that waits longer waits for a writer that does not pass
// the turnstile (sqlite3, a long foreign transaction), where the turnstile's order
// gains nothing. So a few seconds separate a stopped holder from a live one without
// making every process wait the whole busy_timeout (15 s) for it.
const turnstileWait = 5 * time.Second

// turnstileStuckWait is how long a writer tries the turnstile while it is stuck: a bit
// more than one poll of a process waiting in SQLite's busy handler (which sleeps at
// most 100 ms between attempts), so that a live waiter holding the turnstile gets the
// write lock meanwhile and releases the turnstile; a stopped holder costs each
// transaction this much.
const turnstileStuckWait = 120 * time.Millisecond

// openTurnstile opens (creating owner-only) the turnstile file beside the database.
// A flock needs only read access. Unlike -wal and -shm the file stays after the last
// process closes the database, so one made by another user (a command run with sudo)
// may be unreadable: the process then writes without the turnstile, as releases
// before it did, and says so. The same holds for anything but a regular file in its
// place: the open neither follows a symlink (which would create or lock a file
// elsewhere) nor blocks (opening a FIFO for reading waits for a writer forever).
func openTurnstile(dbPath string, log *slog.Logger) *turnstile {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := dbPath + "-wait"
	f, err := openRegular(name, syscall.O_CREAT)
	if err != nil {
		log.Warn("turnstile unavailable, writing without it", "file", name, "error", err)
		return nil
	}
	return &turnstile{f: f, fd: int(f.Fd()), log: log, sem: make(chan struct{}, 1), wait: turnstileWait, stuckWait: turnstileStuckWait}
}

// openRegular opens name read-only, and only if it is a regular file: no symlink is
// followed and no open blocks (a FIFO's would wait for a writer). flag may add
// O_CREAT, which creates the file owner-only.
func openRegular(name string, flag int) (*os.File, error) {
	fd, err := syscall.Open(name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC|flag, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (t *turnstile) close() {
	if t != nil {
		t.f.Close()
	}
}

// enter takes the turnstile, waiting while another process (or goroutine) holds it;
// the returned func leaves it. A nil turnstile (a read-only handle) is always free.
func (t *turnstile) enter(ctx context.Context) (leave func(), err error) {
	if t == nil {
		return func() {}, nil
	}
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := func() { <-t.sem }
	// Non-blocking attempts: a blocked flock could not be abandoned when ctx ends.
	// The turnstile is free except while someone waits for the write lock, so the
	// first attempt nearly always succeeds; a waiter polls every few milliseconds.
	wait := t.wait
	if t.stuck {
		wait = t.stuckWait
	}
	deadline := time.Now().Add(wait)
	delay := 500 * time.Microsecond
	for {
		err := syscall.Flock(t.fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if t.stuck {
				t.stuck = false
				t.log.Info("turnstile free again", "file", t.f.Name())
			}
			return func() {
				syscall.Flock(t.fd, syscall.LOCK_UN)
				out()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			t.log.Warn("turnstile unavailable", "file", t.f.Name(), "error", err)
			return out, nil
		}
		if time.Now().After(deadline) {
			// Still stuck since a wait timed out: the short wait ends quietly.
			if !t.stuck {
				t.stuck = true
				t.log.Warn("turnstile held too long, writing without it until it is free", "file", t.f.Name(), "waited", t.wait)
			}
			return out, nil
		}
		if err := sleepCtx(ctx, delay); err != nil {
			out()
			return nil, err
		}
		delay = min(2*delay, 5*time.Millisecond)
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beginWriter begins a plain write transaction (BEGIN IMMEDIATE: the connection's
// _txlock, from the dialect's connection string) through the turnstile. The writer connection is taken from the pool first:
// goroutines of this process queue for it, not for the turnstile, which is then held
// only while this process waits for SQLite's lock, never while it waits for itself.
// done returns the connection; call it after the transaction ends.
func (db *DB) beginWriter(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	leave, err := db.turn.enter(ctx)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	tx, err = conn.BeginTx(ctx, db.dia.writeTx)
	leave()
	if err == nil && db.dia.lockWriter != "" {
		if _, err = tx.ExecContext(ctx, db.dia.lockWriter); err != nil {
			tx.Rollback()
		}
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return tx, func() { conn.Close() }, nil
}

// withWriter runs fn on the writer connection outside any transaction of the
// store's, through the turnstile as beginWriter does: each statement fn runs is a
// transaction of its own. Where the engine has a writer lock to take (lockWriter),
// fn runs in one transaction that takes it first.
func (db *DB) withWriter(ctx context.Context, fn func(c conn) error) error {
	raw, err := db.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer raw.Close()
	leave, err := db.turn.enter(ctx)
	if err != nil {
		return err
	}
	defer leave()
	if db.dia.lockWriter == "" {
		return fn(conn{raw, db.dia})
	}
	tx, err := raw.BeginTx(ctx, db.dia.writeTx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, db.dia.lockWriter); err != nil {
		return err
	}
	if err := fn(conn{tx, db.dia}); err != nil {
		return err
	}
	return tx.Commit()
}

// execWriter runs one statement in a transaction of its own on the writer connection
// (withWriter).
func (db *DB) execWriter(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = db.withWriter(ctx, func(c conn) error {
		res, err = c.execContext(ctx, query, args...)
		return err
	})
	return res, err
}

// testHold is the test hold of every database that sets none itself (SetTestHold;
// zero in production).
var testHold atomic.Int64

// SetTestHold makes every item of the batched writers (a load's entry, a pipeline's
// instance, a re-indexed row) take d longer, inside its batch's transaction so the
// batch holds the writer as long as slow items would, on every database of the
// process that sets no hold of its own (DB.SetTestHold). It is for a test's child
// process, which opens its database inside the program; a test that opens the
// database itself sets the hold on that database, so tests beside it run at full
// speed. Production never calls it.
func SetTestHold(d time.Duration) { testHold.Store(int64(d)) }

// SetTestHold is the package's SetTestHold for db alone (and the private database of
// its dry runs): tests that need long operations use it instead of large data.
// Production never calls it.
func (db *DB) SetTestHold(d time.Duration) { db.hold.Store(int64(d)) }

// HoldForTest waits n items' worth of db's test hold, or the process's when db has
// none (nothing in production).
func (db *DB) HoldForTest(n int) {
	d := db.hold.Load()
	if d == 0 {
		d = testHold.Load()
	}
	if d > 0 {
		time.Sleep(time.Duration(n) * time.Duration(d))
	}
}
