package testkit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"dataservice/store"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the cluster's maintenance connection
)

// The test suite runs against SQLite by default. With DATASERVICE_TEST_DB=postgres it
// runs against PostgreSQL instead: every database the kit makes is a new database of
// the cluster at DATASERVICE_TEST_PG (a URL whose user may CREATE DATABASE; .ci/run
// starts a throwaway cluster and sets both), made from a template database by
// CREATE DATABASE … TEMPLATE and dropped when the test ends. Tests that are SQLite's
// by nature (file modes, the WAL, a full disk) skip there with SQLiteOnly.

// EnvEngine, EnvPostgres and EnvRequirePostgres are the switches: the engine of the
// pass, the cluster's URL, and (CI) that the PostgreSQL pass must run.
const (
	EnvEngine          = "DATASERVICE_TEST_DB"
	EnvPostgres        = "DATASERVICE_TEST_PG"
	EnvRequirePostgres = "DATASERVICE_REQUIRE_POSTGRES"
)

// Postgres reports whether this pass runs against PostgreSQL.
func Postgres() bool { return os.Getenv(EnvEngine) == "postgres" }

// SQLiteOnly skips a test that is SQLite's by nature on the PostgreSQL pass, saying why.
func SQLiteOnly(tb testing.TB, why string) {
	tb.Helper()
	if Postgres() {
		tb.Skipf("SQLite only: %s", why)
	}
}

// cluster is the maintenance connection to the test cluster, opened once.
var cluster struct {
	once sync.Once
	db   *sql.DB
	url  *url.URL
	err  error
}

// clusterDB connects to the cluster at DATASERVICE_TEST_PG.
func clusterDB() (*sql.DB, *url.URL, error) {
	cluster.once.Do(func() {
		raw := os.Getenv(EnvPostgres)
		if raw == "" {
			cluster.err = fmt.Errorf("%s=postgres needs %s, the URL of a PostgreSQL cluster whose user may CREATE DATABASE", EnvEngine, EnvPostgres)
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			cluster.err = fmt.Errorf("%s: %w", EnvPostgres, err)
			return
		}
		db, err := sql.Open("pgx", raw)
		if err != nil {
			cluster.err = err
			return
		}
		db.SetMaxOpenConns(4)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			cluster.err = fmt.Errorf("connect to the test cluster %s: %w", u.Redacted(), err)
			return
		}
		cluster.db, cluster.url = db, u
	})
	return cluster.db, cluster.url, cluster.err
}

// PostgresCluster is the URL of the test cluster's maintenance database, or the
// reason there is none.
func PostgresCluster() (string, error) {
	_, u, err := clusterDB()
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// databaseURL is the cluster's URL naming database name.
func databaseURL(u *url.URL, name string) string {
	v := *u
	v.Path = "/" + name
	return v.String()
}

// newDatabaseName is a fresh database name: dstest_ and 16 hex digits.
func newDatabaseName() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "dstest_" + hex.EncodeToString(b)
}

// createDatabase makes a new database, from template (empty: PostgreSQL's
// template0), and returns its URL.
func createDatabase(template string) (name, addr string, err error) {
	return createDatabaseWith(template, "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'")
}

// createDatabaseWith is createDatabase with locale, the CREATE DATABASE options
// of the database's collation.
func createDatabaseWith(template, locale string) (name, addr string, err error) {
	db, u, err := clusterDB()
	if err != nil {
		return "", "", err
	}
	if template == "" {
		template = "template0"
	}
	name = newDatabaseName()
	// A template in use by another connection cannot be copied: the kit closes its
	// template stores before copying, but the server may still be ending a session.
	for attempt := 0; ; attempt++ {
		_, err = db.Exec("CREATE DATABASE " + name + " TEMPLATE " + template + " ENCODING 'UTF8' " + locale)
		if err == nil || attempt == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return "", "", fmt.Errorf("create database from %s: %w", template, err)
	}
	return name, databaseURL(u, name), nil
}

// dropDatabase drops a database of the cluster, ending its sessions.
func dropDatabase(name string) error {
	db, _, err := clusterDB()
	if err != nil {
		return err
	}
	_, err = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	return err
}

// NewAddress is the address of a new, empty database for the test: a file path in
// tb.TempDir() on the SQLite pass, the URL of a new database of the test cluster on
// the PostgreSQL pass (dropped when the test ends). name is the file's name.
func NewAddress(tb testing.TB, name string) string {
	tb.Helper()
	if !Postgres() {
		return filepath.Join(tb.TempDir(), name)
	}
	return newPostgresDatabase(tb, "")
}

// NewAddressCollated is NewAddress whose PostgreSQL database compares text by a
// language's rules rather than by bytes, as a production database created with a
// locale such as en_US.UTF-8 does: ICU's root collation (und-x-icu), which every
// PostgreSQL built with ICU has, whatever locales the system holds. (The kit's other
// databases compare text as C.UTF-8, by code point.)
func NewAddressCollated(tb testing.TB, name string) string {
	tb.Helper()
	if !Postgres() {
		return NewAddress(tb, name)
	}
	db, addr, err := createDatabaseWith("", "LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'und'")
	if err != nil {
		tb.Fatalf("testkit: a database collated by ICU's root locale: %v", err)
	}
	dropAtEnd(tb, db)
	return addr
}

// newPostgresDatabase makes a database from template for the test and drops it
// when the test ends.
func newPostgresDatabase(tb testing.TB, template string) string {
	tb.Helper()
	name, addr, err := createDatabase(template)
	if err != nil {
		tb.Fatalf("testkit: %v", err)
	}
	dropAtEnd(tb, name)
	return addr
}

// dropAtEnd drops the database name when the test ends.
func dropAtEnd(tb testing.TB, name string) {
	tb.Cleanup(func() {
		if err := dropDatabase(name); err != nil {
			tb.Errorf("testkit: drop %s: %v", name, err)
		}
	})
}

// postgresTemplate makes a template database filled by fill and returns its name.
func postgresTemplate(fill func(db *store.DB) error) (string, error) {
	name, addr, err := createDatabase("")
	if err != nil {
		return "", err
	}
	db, err := openMigrator(addr, store.Options{})
	if err != nil {
		return name, err
	}
	err = fill(db)
	migrators.Delete(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return name, err
}
