package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

func openDialectDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "d.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// SQLite's statement text is what the store wrote inline before the dialect: the
// prepared-statement caches and the query plans see the same SQL.
func TestSQLiteDialectText(t *testing.T) {
	t.Parallel()
	d := sqliteDialect
	for _, c := range []struct{ got, want string }{
		{d.rebind("SELECT ?1 WHERE x = ? AND y = ?2"), "SELECT ?1 WHERE x = ? AND y = ?2"},
		{d.jsonValue("i.data", "'$.port'"), "json_extract(i.data, '$.port')"},
		{d.jsonText("data", "?"), "data ->> ?"},
		{d.jsonType("data", "?"), "json_type(data, ?)"},
		{d.jsonSet("data", "'$.last_used'", "?"), "json_set(data, '$.last_used', ?)"},
		{d.jsonRemove("data", "?"), "json_remove(data, ?)"},
		{d.jsonHolds("instances.data", "?", "?"), "EXISTS (SELECT 1 FROM json_each(instances.data, ?) WHERE json_each.value = ?)"},
		{d.setLayoutVersion(10), "PRAGMA user_version = 10"},
		{d.greatest("high", "?"), "max(high, ?)"},
		{d.insertInstanceIfAbsent, d.insertInstance + " ON CONFLICT(classname, keyname) DO NOTHING"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if got, want := len(d.layout), 20; got != want {
		t.Errorf("SQLite layout has %d steps, want %d (the released layout version)", got, want)
	}
	dsn := d.dsn("/tmp/a b.db", false)
	if want := "file:/tmp/a%20b.db?_pragma=busy_timeout%2815000%29&_pragma=foreign_keys%281%29&_pragma=synchronous%28NORMAL%29&_pragma=journal_mode%28WAL%29&_txlock=immediate"; dsn != want {
		t.Errorf("writer dsn = %q, want %q", dsn, want)
	}
}

// The JSON fragments mean on a real file what the statements need: a value, a value
// as text, a type, a scalar or a list holding a value, a set and a removal.
func TestSQLiteDialectJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDialectDB(t)
	d, c := db.dia, db.reader()
	doc := `'{"a":"x","l":["x","y"],"n":3}'`
	for _, q := range []struct{ expr, want string }{
		{d.jsonValue(doc, "'$.n'"), "3"},
		{d.jsonText(doc, "'$.a'"), "x"},
		{d.jsonText(doc, "'$.l'"), `["x","y"]`},
		{d.jsonType(doc, "'$.l'"), "array"},
		{"coalesce(" + d.jsonType(doc, "'$.none'") + ", 'null')", "null"},
		{d.jsonHolds(doc, "'$.a'", "'x'"), "1"},
		{d.jsonHolds(doc, "'$.l'", "'y'"), "1"},
		{d.jsonHolds(doc, "'$.l'", "'z'"), "0"},
		{d.jsonSet(doc, "'$.a'", "'w'"), `{"a":"w","l":["x","y"],"n":3}`},
		{d.jsonRemove(doc, "'$.l'"), `{"a":"x","n":3}`},
	} {
		var got string
		if err := c.queryRowContext(ctx, "SELECT "+q.expr).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q.expr, err)
		}
		if got != q.want {
			t.Errorf("%s = %s, want %s", q.expr, got, q.want)
		}
	}
}

// Error classification reads SQLite's result codes on real errors.
func TestSQLiteDialectErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDialectDB(t)
	ins := "INSERT INTO permissions(keyname) VALUES('p_dup')"
	if _, err := db.writer().execContext(ctx, ins); err != nil {
		t.Fatal(err)
	}
	_, dup := db.writer().execContext(ctx, ins)
	if !isUnique(dup) || isBusy(dup) || isDiskFull(dup) {
		t.Errorf("duplicate key %v: unique %v busy %v disk full %v, want only unique", dup, isUnique(dup), isBusy(dup), isDiskFull(dup))
	}
	// A second connection without a busy timeout meets the writer's lock at once.
	other, err := sql.Open("sqlite", "file:"+db.Path()+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, busy := other.ExecContext(ctx, "INSERT INTO registry(key, value) VALUES('k', 'v')")
	tx.Rollback()
	if !isBusy(busy) || isUnique(busy) {
		t.Errorf("locked file %v: busy %v unique %v, want busy", busy, isBusy(busy), isUnique(busy))
	}
	if full := fmt.Errorf("write: %w", syscall.ENOSPC); !isDiskFull(full) {
		t.Errorf("isDiskFull(%v) = false, want true", full)
	}
	if isUnique(nil) || isBusy(nil) || isDiskFull(nil) || isUnique(errors.New("UNIQUE constraint failed")) {
		t.Error("no error, or a message without SQLite's code, classified as an engine error")
	}
}

// insertID returns the new row's id, and no row for an insert the conflict clause
// skipped.
func TestSQLiteDialectInsertID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDialectDB(t)
	w := db.writer()
	q := "INSERT INTO permissions(keyname) VALUES(?) ON CONFLICT(keyname) DO NOTHING"
	id, ok, err := db.dia.insertID(ctx, w, q, "p_new")
	if err != nil || !ok {
		t.Fatalf("insert: %d %v %v", id, ok, err)
	}
	var want int64
	if err := w.queryRowContext(ctx, "SELECT id FROM permissions WHERE keyname = 'p_new'").Scan(&want); err != nil {
		t.Fatal(err)
	}
	if id != want {
		t.Errorf("id = %d, want %d", id, want)
	}
	if id, ok, err := db.dia.insertID(ctx, w, q, "p_new"); err != nil || ok || id != 0 {
		t.Errorf("skipped insert: %d %v %v, want 0 false nil", id, ok, err)
	}
}

// The online backup is a copy a store opens with the same rows.
func TestSQLiteDialectBackup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDialectDB(t)
	if _, err := db.writer().execContext(ctx, "INSERT INTO registry(key, value) VALUES('k', 'v')"); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	if err := db.Backup(ctx, dest); err != nil {
		t.Fatal(err)
	}
	cp, err := Open(ctx, dest, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if v, err := cp.Registry(ctx, "k"); err != nil || v != "v" {
		t.Fatalf("copy's registry k = %q %v, want v", v, err)
	}
}

// A table owner's door runs statements on its own table and refuses writes of any
// other table, several statements at once, and anything but SELECT, INSERT, UPDATE
// and DELETE.
func TestTableDoor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openDialectDB(t)
	own := &Table{name: "sessions"}
	err := db.WithTx(ctx, func(tx *Tx) error {
		if _, err := own.Exec(ctx, tx, `INSERT INTO sessions(token_hash, user_id, login, csrf, created_at, last_seen,
			expires_at) VALUES(?, 1, 'u', 'c', 0, 0, 0)`, "h"); err != nil {
			return err
		}
		var n int
		if err := own.QueryRow(ctx, tx, "UPDATE sessions SET last_seen = 5 WHERE token_hash = ? RETURNING last_seen", "h").Scan(&n); err != nil || n != 5 {
			return fmt.Errorf("update returning: %d %v", n, err)
		}
		for _, q := range []string{
			"INSERT INTO instances(classname, keyname, created_at, updated_at) VALUES('c', 'k', '', '')",
			"UPDATE instances SET keyname = 'x'",
			"delete from permissions",
			"UPDATE sessions SET login = 'x'; DELETE FROM instances",
			"DROP TABLE instances",
			"PRAGMA user_version = 1",
			"INSERT INTO sessions_other(x) VALUES(1)",
		} {
			if _, err := own.Exec(ctx, tx, q); err == nil {
				return fmt.Errorf("%s: ran, want refused", q)
			}
		}
		if err := own.QueryRow(ctx, tx, "UPDATE instances SET keyname = 'x' RETURNING id").Scan(&n); err == nil {
			return errors.New("update of instances through QueryRow ran, want refused")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var login string
	if err := own.ReadRow(ctx, db, "SELECT login FROM sessions WHERE token_hash = ?", "h").Scan(&login); err != nil || login != "u" {
		t.Fatalf("read: %q %v", login, err)
	}
	rows, err := own.Read(ctx, db, "SELECT count(*) FROM instances")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
}

// The fragments that replaced inline SQLite text give it back unchanged.
func TestSQLiteDialectFragments(t *testing.T) {
	t.Parallel()
	d := sqliteDialect
	db := &DB{dia: d}
	for _, c := range []struct{ got, want string }{
		{d.contains("data", "?"), "instr(data, ?) > 0"},
		{db.ipKeyRange(), "i.classname = 'ipam_ip' AND i.keyname >= ? AND i.keyname <= ?\n\tAND length(i.keyname) = 8 AND i.keyname NOT GLOB '*[^0-9a-f]*'"},
		{d.like("c", "?") + " " + d.rowOrder, `c LIKE ? ESCAPE '\' rowid`},
		{d.convertKeyname, "UPDATE OR IGNORE instances SET keyname = ?, displayname = ?, updated_at = ? WHERE id = ?"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// Every dialect fills every field (the SQLite one included): a statement or function
// left out would fail at its first use. The read snapshot's and the write
// transaction's options may be nil (the engine's default transaction is one snapshot,
// and sees the database as its write lock finds it), and so may resetIdentities
// (SQLite numbers new rows from the largest id), and so may the search index's
// backlog statements (an engine that maintains its index in every write has none).
func TestDialectsAreComplete(t *testing.T) {
	mayBeZero := map[string]bool{"snapshot": true, "writeTx": true, "turnstile": true, "lockWriter": true, "skipLocked": true, "resetIdentities": true, "deferIndexes": true,
		"searchBacklog": true, "searchLag": true, "listSearch": true, "searchMergeStart": true, "searchMergeMore": true, "totalChanges": true, "listSearchWhere": true, "rawListingOn": true, "rawListingOff": true, "reindexUpTo": true, "searchUnlisted": true, "searchListedFrom": true, "searchListedWhere": true, "searchListedID": true,
		"stageWaiting": true, "stageListed": true, "searchStagedFrom": true, "searchStagedWhere": true, "searchStagedID": true}
	for _, d := range dialects {
		v := reflect.ValueOf(*d)
		for i := 0; i < v.NumField(); i++ {
			name := v.Type().Field(i).Name
			if v.Field(i).IsZero() && !mayBeZero[name] {
				t.Errorf("dialect %s: field %s is not set", d.driver, name)
			}
		}
	}
}
