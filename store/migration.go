package store

import (
	"context"
	"errors"

	"dataservice/store/model"
)

// Migrator is the migration door: the one value that begins Migrations. It is no
// method of DB: the program that opens the file (the CLI, and the tests' kit) gets it
// from OpenMigrator alongside the DB and hands it to bootstrap, whose start-up
// sequence alone migrates. The server, the console and the task runner hold only the
// DB, so the compiler keeps them from every migration-only writer.
type Migrator struct {
	db *DB
}

// OpenMigrator is Open, returning besides the DB the Migrator of that DB. Only the
// programs that run the start-up sequence call it (the CLI, the tests' kit); every
// other holder of a DB cannot migrate.
func OpenMigrator(ctx context.Context, path string, o Options) (*DB, *Migrator, error) {
	db, err := Open(ctx, path, o)
	if err != nil {
		return nil, nil, err
	}
	return db, &Migrator{db: db}, nil
}

// DB is the database the Migrator migrates.
func (mg *Migrator) DB() *DB { return mg.db }

// Migrate runs fn in one migration transaction, committed when fn returns nil and
// rolled back otherwise.
func (mg *Migrator) Migrate(ctx context.Context, fn func(m *Migration) error) error {
	return mg.db.WithTxAs(ctx, Revisions{Off: true}, func(tx *Tx) error {
		// A migration may write anything with its own SQL: its commit bumps the schema
		// generation, so every cache kept at it (schemas, configuration, the cached
		// classes) is read again.
		tx.touched = true
		return fn(&Migration{tx})
	})
}

// Rename is the cascading rename of in (of schema s) to newKey inside tx, any write
// transaction of the Migrator's DB, recording revisions as tx does: the apply path's
// rename without its permission checks. Tests set up renames with it
// (internal/testkit); nothing the API, the console or a task runs reaches it.
func (mg *Migrator) Rename(ctx context.Context, tx *Tx, s *model.Schema, in *Instance, newKey string) (*RenameReport, error) {
	if tx.db != mg.db {
		return nil, errors.New("rename: the transaction is not of the migrator's database")
	}
	return tx.cascadeRename(ctx, s, in, newKey)
}

// Migration is a write transaction of the start-up sequence: the bootstrap of an empty
// file, the migration blocks, and the keys-and-admin step. It writes as the system
// identity (every permission) and records no revision rows, since start-up
// migrations write none.
//
// Its instance writes go through the one apply path (Apply, and Load with System and
// NoRevisions), so they are validated like any other write. It alone reaches the few
// bulk writers a load cannot express, which the seed gives to migrations only: the
// direct deletion of a permission or of a field definition, and the bulk keyname
// conversion followed by one reference rewrite. Nothing the API, the console or a task
// runs begins one.
//
// Its transaction is embedded under an unexported name: the Tx methods are promoted,
// but no code outside store can make a Migration of another transaction. Only
// Migrator.Migrate makes one.
type Migration struct {
	*migrationTx
}

// migrationTx names the embedded transaction of a Migration (unexported).
type migrationTx = Tx

// Tx is the migration's transaction, for the start-up sequence's loads (Tx.Load with
// System and NoRevisions). A Tx cannot be made back into a Migration.
func (m *Migration) Tx() *Tx { return m.migrationTx }

// Apply is the apply path as the system identity, without revision.
func (m *Migration) Apply(ctx context.Context, w Write) (Outcome, error) {
	return m.migrationTx.Apply(ctx, w, ApplyOptions{Auth: model.SystemAuth(), System: true, Migration: true})
}

// ConvertKeyname changes an instance's keyname (and displayname) in place, without
// validation, cascade or revision: the bulk conversions of blocks 4.8.0 and 4.9.0,
// followed by one RewriteAllReferences pass. When another instance of the class holds
// newKey, nothing changes and the error is model.EConflict; the transaction goes on.
func (m *Migration) ConvertKeyname(ctx context.Context, in *Instance, newKey, displayname string) error {
	return m.convertKeyname(ctx, in, newKey, displayname)
}

// RewriteAllReferences applies renames of target's instances to every `schema` field
// referencing target, one pass per referencing schema (rewriteAll).
func (m *Migration) RewriteAllReferences(ctx context.Context, target string, renames map[string]string) (int, error) {
	return m.rewriteAllReferences(ctx, target, renames)
}

// RewriteAllReferencesFunc is RewriteAllReferences with the renames given by a rule:
// rename(old) returns the new keyname and true for a value to rewrite. Bulk conversions
// use it so they need not hold a map of every keyname they changed.
func (m *Migration) RewriteAllReferencesFunc(ctx context.Context, target string, rename func(old string) (string, bool)) (int, error) {
	return m.rewriteAll(ctx, target, "", rename)
}

// DeleteField deletes the definition of field keyname of classname and its values
// (a field definition a reload cannot remove).
func (m *Migration) DeleteField(ctx context.Context, classname, keyname string) error {
	return m.deleteField(ctx, classname, keyname)
}

// DeletePermission deletes the permission key, whatever its origin (a permission a
// reload cannot remove); a missing one is no error.
func (m *Migration) DeletePermission(ctx context.Context, key string) error {
	return m.deletePermission(ctx, key)
}

// Exec runs one statement as written (a repair no load can express), inside the
// migration transaction. A statement with arguments is prepared once per transaction,
// so a loop inserting rows parses it once. Tests set up states no load can make with
// it (internal/testkit); nothing the API, the console or a task runs reaches it.
//
// On SQLite its UPDATEs of instances are listed for the search index as the store's
// own are (a temporary trigger for the rest of the transaction, rawListing).
func (m *Migration) Exec(ctx context.Context, query string, args ...any) error {
	if err := m.rawListing(ctx); err != nil {
		return err
	}
	_, err := m.execAny(ctx, query, args...)
	return err
}
