package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// owned holds the layout steps other packages registered for their own tables, by
// owner. Like store's own list, each owner's list is append-only; layout_versions
// records how many of its steps a file has run.
var owned = struct {
	sync.Mutex
	steps map[string][]string
}{steps: map[string][]string{}}

// RegisterLayout registers the table-layout steps of a package that owns tables of its
// own (the task queue owns the tasks table), so that Open brings them up to date after
// store's own layout, each step in its own transaction with its version bump. The
// owner names its table: a plain SQL name that is none of store's own tables (nor an
// engine's shadow table of one, nor a name the engine reserves), since the Table it
// gets writes that table and no other. Steps
// are SQL scripts in order, written in SQL every engine runs (plain tables and
// indexes: engine-specific objects belong to store's own layout, per dialect); the
// list only ever grows (never edit a released step: append one). A package calls it once, from a package-level variable or init, so
// every program that links the package gets its tables; registering an owner twice
// panics, as sql.Register does for a driver. It returns the owner's Table, the door
// its statements go through (the owner names its table).
func RegisterLayout(owner string, steps ...string) *Table {
	owned.Lock()
	defer owned.Unlock()
	if owner == "" || len(steps) == 0 {
		panic("store: RegisterLayout needs an owner and at least one step")
	}
	if err := checkOwner(owner); err != nil {
		panic("store: RegisterLayout: " + err.Error())
	}
	if _, dup := owned.steps[owner]; dup {
		panic("store: RegisterLayout called twice for " + owner)
	}
	owned.steps[owner] = steps
	return &Table{name: owner}
}

// createTable finds the tables a layout step creates, virtual ones marked.
var createTable = regexp.MustCompile(`(?i)\bCREATE\s+(VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)`)

// plainName is a table name a table owner may take: letters, digits and underscores.
var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkOwner refuses an owner name that is not a plain name, that an engine reserves
// (a dialect's reservedPrefix), or that names a table store's own layout creates in
// any dialect (the layout_versions table included) or a shadow table an engine keeps
// for a virtual one (instances_search_...): a Table of that name would write store's
// data past Apply.
func checkOwner(owner string) error {
	if !plainName.MatchString(owner) {
		return fmt.Errorf("owner %q is not a plain table name (letters, digits, underscores)", owner)
	}
	name := strings.ToLower(owner)
	for _, d := range dialects {
		if d.reservedPrefix != "" && strings.HasPrefix(name, d.reservedPrefix) {
			return fmt.Errorf("owner %q: the name is reserved by the database engine", owner)
		}
		for _, step := range append(slices.Clip(d.layout), d.layoutVersionsTable) {
			for _, m := range createTable.FindAllStringSubmatch(step, -1) {
				table := strings.ToLower(m[2])
				if name == table {
					return fmt.Errorf("owner %q: %s is a table of the store's own layout, written through Apply only", owner, m[2])
				}
				if m[1] != "" && strings.HasPrefix(name, table+"_") {
					return fmt.Errorf("owner %q: the name is reserved for the engine's tables of the store's %s", owner, m[2])
				}
			}
		}
	}
	return nil
}

// ownedLayouts returns the registered owners in name order (a stable order for
// migration) with their steps.
func ownedLayouts() (owners []string, steps map[string][]string) {
	owned.Lock()
	defer owned.Unlock()
	steps = make(map[string][]string, len(owned.steps))
	for o, s := range owned.steps {
		owners = append(owners, o)
		steps[o] = s
	}
	sort.Strings(owners)
	return owners, steps
}

// checkFile refuses a file newer than this program or holding schema objects its
// layout does not create. Every writable open runs it before anything writes, whether
// or not it then applies layout steps: a write (a step's or a command's) would fire a
// trigger the file brought along.
func (db *DB) checkFile(ctx context.Context) error {
	if err := db.retryBusy(ctx, db.checkNotNewer); err != nil {
		return err
	}
	check := func(ctx context.Context) (bool, error) { return true, db.dia.checkFile(ctx, db.w) }
	return db.retryBusy(ctx, check)
}

// migrateLayout applies the layout changes the file has not seen yet: every
// registered owner's, then store's own, each in its own transaction together with its
// version bump. The version is read inside the (immediate) transaction so two
// processes opening a new file do not both apply a change. Owners go first because
// store's layout 6 reads the tasks table, which the tasks package creates on new
// files; an owner's tables therefore must not depend on store's.
func (db *DB) migrateLayout(ctx context.Context) error {
	if err := db.checkFile(ctx); err != nil {
		return err
	}
	// A file already up to date needs no write transaction, so opening it does not
	// wait for a writer (a backup taken while a long pipeline commits its batches).
	if checkLayout(ctx, db.writer()) == nil {
		return nil
	}
	owners, steps := ownedLayouts()
	for _, owner := range owners {
		step := func(ctx context.Context) (bool, error) { return db.migrateOwnedStep(ctx, owner, steps[owner]) }
		if err := db.retryBusy(ctx, step); err != nil {
			return err
		}
	}
	return db.retryBusy(ctx, db.migrateLayoutStep)
}

// checkNotNewer refuses a file whose store layout is newer than this program before
// anything is written to it.
func (db *DB) checkNotNewer(ctx context.Context) (bool, error) {
	have, err := db.dia.readLayoutVersion(ctx, db.writer())
	if err != nil {
		return false, fmt.Errorf("read layout version: %w", err)
	}
	if layout := db.dia.layout; have > len(layout) {
		return false, fmt.Errorf("table layout version %d is newer than this program knows (%d)", have, len(layout))
	}
	return true, nil
}

// retryBusy runs step until it reports done or fails.
func (db *DB) retryBusy(ctx context.Context, step func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		done, err := step(ctx)
		if isBusy(err) && time.Now().Before(deadline) {
			// Processes opening a new file together all switch it to WAL on connect;
			// SQLite answers some of them SQLITE_BUSY at once, without the busy
			// timeout (deadlock avoidance). Try again shortly.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err != nil || done {
			return err
		}
	}
}

func (db *DB) migrateLayoutStep(ctx context.Context) (done bool, err error) {
	raw, release, err := db.beginWriter(ctx)
	if err != nil {
		return false, fmt.Errorf("layout: %w", err)
	}
	defer release()
	defer raw.Rollback()
	tx, layout := conn{raw, db.dia}, db.dia.layout
	have, err := db.dia.readLayoutVersion(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("read layout version: %w", err)
	}
	if have > len(layout) {
		return false, fmt.Errorf("table layout version %d is newer than this program knows (%d)", have, len(layout))
	}
	if have == len(layout) {
		return true, nil
	}
	if _, err := tx.execContext(ctx, layout[have]); err != nil {
		return false, fmt.Errorf("layout %d: %w", have+1, err)
	}
	if _, err := tx.execContext(ctx, db.dia.setLayoutVersion(have+1)); err != nil {
		return false, fmt.Errorf("layout %d: %w", have+1, err)
	}
	if err := raw.Commit(); err != nil {
		return false, fmt.Errorf("layout %d: %w", have+1, err)
	}
	return false, nil
}

// migrateOwnedStep applies the next of owner's steps the file has not run.
func (db *DB) migrateOwnedStep(ctx context.Context, owner string, steps []string) (done bool, err error) {
	raw, release, err := db.beginWriter(ctx)
	if err != nil {
		return false, fmt.Errorf("layout of %s: %w", owner, err)
	}
	defer release()
	defer raw.Rollback()
	tx := conn{raw, db.dia}
	// The owners' versions, kept beside store's PRAGMA user_version (bookkeeping,
	// like the pragma, not a step of the layout).
	if _, err := tx.execContext(ctx, db.dia.layoutVersionsTable); err != nil {
		return false, fmt.Errorf("layout of %s: %w", owner, err)
	}
	have, err := ownedVersion(ctx, tx, owner)
	if err != nil {
		return false, err
	}
	if have > len(steps) {
		return false, fmt.Errorf("table layout version %d of %s is newer than this program knows (%d)", have, owner, len(steps))
	}
	if have == len(steps) {
		return true, nil
	}
	if _, err := tx.execContext(ctx, steps[have]); err != nil {
		return false, fmt.Errorf("layout %d of %s: %w", have+1, owner, err)
	}
	if _, err := tx.execContext(ctx, `INSERT INTO layout_versions(owner, version) VALUES(?, ?)
		ON CONFLICT(owner) DO UPDATE SET version = excluded.version`, owner, have+1); err != nil {
		return false, fmt.Errorf("layout %d of %s: %w", have+1, owner, err)
	}
	if err := raw.Commit(); err != nil {
		return false, fmt.Errorf("layout %d of %s: %w", have+1, owner, err)
	}
	return false, nil
}

// ownedVersion is how many of owner's layout steps the file has run (0: none).
func ownedVersion(ctx context.Context, q querier, owner string) (int, error) {
	var have int
	err := q.queryRowContext(ctx, "SELECT version FROM layout_versions WHERE owner = ?", owner).Scan(&have)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read layout version of %s: %w", owner, err)
	}
	return have, nil
}

// checkLayout reports whether a file opened read-only has the layout this program
// needs: store's own and every registered owner's, none older and none newer.
func checkLayout(ctx context.Context, r conn) error {
	have, err := r.dia.readLayoutVersion(ctx, r)
	if err != nil {
		return err
	}
	if layout := r.dia.layout; have != len(layout) {
		return fmt.Errorf("table layout version %d, this program needs %d "+
			"(run `dataservice migrate` with write access to update it)", have, len(r.dia.layout))
	}
	owners, steps := ownedLayouts()
	for _, owner := range owners {
		have, err := ownedVersion(ctx, r, owner)
		if err != nil {
			return err
		}
		if have != len(steps[owner]) {
			return fmt.Errorf("table layout version %d of %s, this program needs %d "+
				"(run `dataservice migrate` with write access to update it)", have, owner, len(steps[owner]))
		}
	}
	return nil
}
