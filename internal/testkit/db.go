package testkit

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/store"
	"dataservice/store/codec"
)

// Options tune Open.
type Options struct {
	// Logger is the store's logger; nil: warnings and errors to tb.Log.
	Logger *slog.Logger
	// Clock is the store's clock; nil: FixedClock.
	Clock func() time.Time
	// IgnoreCloseError closes the database at the end without checking the error
	// (for tests that close it themselves).
	IgnoreCloseError bool
}

// Open opens (creating) the database file at path; it is closed when the test ends.
func Open(tb testing.TB, path string, o Options) *store.DB {
	tb.Helper()
	if o.Logger == nil {
		o.Logger = Logger(tb, slog.LevelWarn)
	}
	db, err := store.Open(context.Background(), path, store.Options{Logger: o.Logger})
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	if o.Clock != nil {
		db.Now = o.Clock
	} else {
		db.Now = FixedClock
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil && !o.IgnoreCloseError {
			tb.Errorf("close: %v", err)
		}
	})
	return db
}

// OpenEmpty opens a new database file in tb.TempDir() without any definitions.
func OpenEmpty(tb testing.TB, o Options) *store.DB {
	tb.Helper()
	return Open(tb, filepath.Join(tb.TempDir(), "test.db"), o)
}

// NewBuiltinDB opens a new database file in tb.TempDir() with the built-in definitions
// loaded (LoadBuiltins), the fixed clock and a t.Log logger.
func NewBuiltinDB(tb testing.TB) *store.DB {
	tb.Helper()
	db := OpenEmpty(tb, Options{})
	LoadBuiltins(tb, db)
	return db
}

// LoadBuiltins loads the built-in definitions as the start-up sequence loads them:
// 00_permission.yml first, then the other files in name order, with every
// permission and without revisions.
func LoadBuiltins(tb testing.TB, db *store.DB) {
	tb.Helper()
	fsys := builtin.Init()
	names, err := fs.Glob(fsys, "*.yml")
	if err != nil {
		tb.Fatalf("list built-ins: %v", err)
	}
	sort.Strings(names)
	order := []string{"00_permission.yml"}
	for _, n := range names {
		if n != "00_permission.yml" {
			order = append(order, n)
		}
	}
	for _, n := range order {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			tb.Fatalf("read %s: %v", n, err)
		}
		entries, err := codec.ParseDocument(n, data)
		if err != nil {
			tb.Fatalf("parse %s: %v", n, err)
		}
		res, err := db.Load(context.Background(), entries, store.LoadOptions{System: true, NoRevisions: true})
		if err != nil {
			tb.Fatalf("load %s: %v", n, err)
		}
		if res.Errors != 0 {
			tb.Fatalf("load %s: %d errors: %v", n, res.Errors, res.Messages)
		}
	}
}

// Bootstrap runs the start-up sequence on db with o, filling the test version and the
// embedded built-in files where o leaves them zero; an error fails the test.
func Bootstrap(tb testing.TB, db *store.DB, o bootstrap.Options) {
	tb.Helper()
	if o.Version == "" {
		o.Version, o.VersionDate = Version, VersionDate
	}
	if o.Init == nil {
		o.Init = builtin.Init()
	}
	if err := bootstrap.Run(context.Background(), db, o); err != nil {
		tb.Fatalf("bootstrap: %v", err)
	}
}

// template is a database file migrated by the start-up sequence once per test
// binary; MigratedFile copies it, which is much faster than a start each time.
var template struct {
	once sync.Once
	path string
	err  error
}

func templatePath() (string, error) {
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "testkit-template-")
		if err != nil {
			template.err = err
			return
		}
		path := filepath.Join(dir, "template.db")
		ctx := context.Background()
		db, err := store.Open(ctx, path, store.Options{})
		if err != nil {
			template.err = err
			return
		}
		err = bootstrap.Run(ctx, db, bootstrap.Options{Version: Version, VersionDate: VersionDate, Init: builtin.Init()})
		// Closing the last connection folds the WAL into the main file, so copying
		// that one file is enough.
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if _, serr := os.Stat(path + "-wal"); err == nil && serr == nil {
			err = fmt.Errorf("%s-wal left after close", path)
		}
		template.path, template.err = path, err
	})
	return template.path, template.err
}

// Cleanup removes the files the kit made for the whole test binary; a TestMain calls
// it after m.Run().
func Cleanup() {
	if template.path != "" {
		os.RemoveAll(filepath.Dir(template.path))
	}
}

// MigratedFile returns the path of a new database file in tb.TempDir() after one
// start with the test version (built-in definitions, configuration, no admin
// password).
func MigratedFile(tb testing.TB) string {
	tb.Helper()
	return MigratedFileIn(tb, tb.TempDir())
}

// MigratedFileIn is MigratedFile in dir (a small filesystem of a full-disk test).
func MigratedFileIn(tb testing.TB, dir string) string {
	tb.Helper()
	src, err := templatePath()
	if err != nil {
		tb.Fatalf("bootstrap template database: %v", err)
	}
	dst := filepath.Join(dir, "data.db")
	in, err := os.Open(src)
	if err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	if err := out.Close(); err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	return dst
}

// NewMigratedDB opens a new migrated database (MigratedFile) with o.
func NewMigratedDB(tb testing.TB, o Options) *store.DB {
	tb.Helper()
	return Open(tb, MigratedFile(tb), o)
}

// OpenFile opens an existing database file as the program opens it: the real clock
// and no store log. It is closed when the test ends; the test may close it earlier.
func OpenFile(tb testing.TB, path string) *store.DB {
	tb.Helper()
	return Open(tb, path, Options{Logger: slog.New(slog.DiscardHandler), Clock: time.Now, IgnoreCloseError: true})
}
