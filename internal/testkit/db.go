package testkit

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	db, err := openMigrator(path, store.Options{Logger: o.Logger, SecretKey: SecretKeyOf(path)})
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { migrators.Delete(db) })
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

// SecretKeyOf is the key of encrypted secrets the kit gives a PostgreSQL test
// database at addr (nil for a SQLite file, whose key file the store makes beside it):
// the same for every open of one address, as every node of a cluster shares one key.
func SecretKeyOf(addr string) []byte {
	if !strings.HasPrefix(addr, "postgres://") && !strings.HasPrefix(addr, "postgresql://") {
		return nil
	}
	sum := sha256.Sum256([]byte("dataservice test secret key\x00" + addr))
	return sum[:]
}

// migrators holds the migration door of every database the kit opened, by its
// *store.DB: tests hold the DB, as the server does, and reach the door through the
// kit (Migrator), as the program reaches it through its opener.
var migrators sync.Map

// openMigrator opens the file at path with its Migrator, which it keeps in migrators
// (the caller deletes it when it closes the DB).
func openMigrator(path string, o store.Options) (*store.DB, error) {
	db, mg, err := store.OpenMigrator(context.Background(), path, o)
	if err != nil {
		return nil, err
	}
	migrators.Store(db, mg)
	return db, nil
}

// migratorOf is the Migrator of db, nil when the kit did not open db.
func migratorOf(db *store.DB) *store.Migrator {
	mg, _ := migrators.Load(db)
	m, _ := mg.(*store.Migrator)
	return m
}

// Migrator is the migration door of db, which the kit opened (Open and the functions
// built on it); the test fails for a database the kit did not open.
func Migrator(tb testing.TB, db *store.DB) *store.Migrator {
	tb.Helper()
	mg := migratorOf(db)
	if mg == nil {
		tb.Fatalf("testkit: %s was not opened by the kit: no migrator", db.Path())
	}
	return mg
}

// OpenStore opens the file at path with o exactly as store.Open does (the store's
// clock, no cleanup: the caller closes it), keeping its Migrator for Migrator. Tests
// that run the start-up sequence or migrate on a database they open themselves open
// it here.
func OpenStore(tb testing.TB, path string, o store.Options) (*store.DB, error) {
	tb.Helper()
	db, err := openMigrator(path, o)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { migrators.Delete(db) })
	return db, nil
}

// OpenEmpty opens a new database file in tb.TempDir() without any definitions.
func OpenEmpty(tb testing.TB, o Options) *store.DB {
	tb.Helper()
	return Open(tb, NewAddress(tb, "test.db"), o)
}

// NewBuiltinDB opens a new database file in tb.TempDir() with the built-in definitions
// loaded (LoadBuiltins), the fixed clock and a t.Log logger. The file is a copy of a
// template loaded once per test binary.
func NewBuiltinDB(tb testing.TB) *store.DB {
	tb.Helper()
	src, err := templateOf("builtin", func(db *store.DB) error {
		db.Now = FixedClock
		return loadBuiltins(db)
	})
	if err != nil {
		tb.Fatalf("load built-ins: %v", err)
	}
	return Open(tb, fromTemplate(tb, src, tb.TempDir(), 0o600), Options{})
}

// LoadBuiltins loads the built-in definitions as the start-up sequence loads them:
// 00_permission.yml first, then the other files in name order, with every
// permission and without revisions.
func LoadBuiltins(tb testing.TB, db *store.DB) {
	tb.Helper()
	if err := loadBuiltins(db); err != nil {
		tb.Fatal(err)
	}
}

// loadBuiltins is LoadBuiltins, returning the first error.
func loadBuiltins(db *store.DB) error {
	fsys := builtin.Init()
	names, err := fs.Glob(fsys, "*.yml")
	if err != nil {
		return fmt.Errorf("list built-ins: %w", err)
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
			return fmt.Errorf("read %s: %w", n, err)
		}
		entries, err := codec.ParseDocument(n, data)
		if err != nil {
			return fmt.Errorf("parse %s: %w", n, err)
		}
		res, err := db.Load(context.Background(), entries, store.LoadOptions{System: true, NoRevisions: true})
		if err != nil {
			return fmt.Errorf("load %s: %w", n, err)
		}
		if res.Errors != 0 {
			return fmt.Errorf("load %s: %d errors: %v", n, res.Errors, res.Messages)
		}
	}
	return nil
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
	if err := bootstrap.Run(context.Background(), Migrator(tb, db), o); err != nil {
		tb.Fatalf("bootstrap: %v", err)
	}
}

// templates are database files made once per test binary and copied for each test,
// which is much faster than making each anew: by key, a *templateFile.
var templates sync.Map

// templateFile is one template: made by the first test that needs it.
type templateFile struct {
	once sync.Once
	path string
	err  error
}

// templateOf returns the path of the template named key, made by fill on a new
// database the first time (with the real clock: fill sets another).
func templateOf(key string, fill func(db *store.DB) error) (string, error) {
	v, _ := templates.LoadOrStore(key, &templateFile{})
	tf := v.(*templateFile)
	tf.once.Do(func() {
		if Postgres() {
			tf.path, tf.err = postgresTemplate(fill)
			return
		}
		dir, err := os.MkdirTemp("", "testkit-template-")
		if err != nil {
			tf.err = err
			return
		}
		path := filepath.Join(dir, "template.db")
		db, err := openMigrator(path, store.Options{})
		if err != nil {
			tf.path, tf.err = path, err
			return
		}
		err = fill(db)
		migrators.Delete(db)
		// Closing the last connection folds the WAL into the main file, so copying
		// that one file is enough.
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if _, serr := os.Stat(path + "-wal"); err == nil && serr == nil {
			err = fmt.Errorf("%s-wal left after close", path)
		}
		tf.path, tf.err = path, err
	})
	if tf.err != nil {
		return "", fmt.Errorf("template %s: %w", key, tf.err)
	}
	return tf.path, nil
}

// templatePath is the template of MigratedFile: one start with the test version.
func templatePath() (string, error) {
	return templateOf("migrated", func(db *store.DB) error {
		return bootstrap.Run(context.Background(), migratorOf(db), bootstrap.Options{Version: Version, VersionDate: VersionDate, Init: builtin.Init()})
	})
}

// copyTemplate copies the template file src to dst, created with perm (before the
// umask) or truncated.
func copyTemplate(tb testing.TB, src, dst string, perm os.FileMode) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		tb.Fatalf("copy template: %v", err)
	}
	if err := out.Close(); err != nil {
		tb.Fatalf("copy template: %v", err)
	}
}

// Cleanup removes the files the kit made for the whole test binary; a TestMain calls
// it after m.Run().
func Cleanup() {
	templates.Range(func(_, v any) bool {
		if tf := v.(*templateFile); tf.path != "" && Postgres() {
			dropDatabase(tf.path)
		} else if tf.path != "" {
			os.RemoveAll(filepath.Dir(tf.path))
		}
		return true
	})
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
	return fromTemplate(tb, src, dir, 0o666)
}

// fromTemplate is the address of a new database made from the template src: a copy
// of its file named data.db in dir, created with perm (before the umask), or on the
// PostgreSQL pass a new database of the cluster made from it.
func fromTemplate(tb testing.TB, src, dir string, perm os.FileMode) string {
	tb.Helper()
	if Postgres() {
		return newPostgresDatabase(tb, src)
	}
	dst := filepath.Join(dir, "data.db")
	copyTemplate(tb, src, dst, perm)
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
