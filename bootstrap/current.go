package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"dataservice/store"
)

var (
	// ErrNeedsMigrate: the stored data version is not the code version, so the
	// start-up sequence (serve or migrate) must run before other commands use the file.
	ErrNeedsMigrate = errors.New("the data needs migrating")
	// ErrNewerData: the stored data was written by a newer version than this code.
	ErrNewerData = errors.New("the data was written by a newer version of dataservice")
)

// Current reports whether a command other than serve and migrate may use db as it
// is, with code version version: nil when DB_VERSION equals it; ErrNeedsMigrate when
// there is none or it differs; ErrNewerData when it is a newer version (compared as
// numbers; as text when either does not parse); ErrRefused when it is older than
// 4.0.0. It reads only.
//
// The blocks a release candidate re-runs at every start (SERVICE_VERSION starting
// with "<block>-RC") do not count: once the sequence has stored that version, the
// data is that version's, and re-running them is the start-up sequence's business,
// not a reason to refuse the other commands.
func Current(ctx context.Context, db *store.DB, version string) error {
	dbv, err := db.Registry(ctx, store.RegDBVersion)
	if err != nil && !store.IsNotFound(err) {
		return err
	}
	switch {
	case dbv == "" || dbv == "0":
		return fmt.Errorf("%w: no DB_VERSION (the start-up sequence never completed on this file)", ErrNeedsMigrate)
	case dbv == version:
		return nil
	case Newer(dbv, version):
		// Before the text comparison with 4.0.0: 10.0.0 is newer, not too old.
		return fmt.Errorf("%w: DB_VERSION %.80q, this is %s", ErrNewerData, dbv, version)
	case dbv < MinVersion:
		return fmt.Errorf("DB_VERSION %.80q: %w", dbv, ErrRefused)
	}
	return fmt.Errorf("%w: DB_VERSION %.80q, SERVICE_VERSION %s", ErrNeedsMigrate, dbv, version)
}

// Newer reports whether stored is a newer version than code: by the numbers
// MAJOR.MINOR.PATCH where both parse (4.10.0 is newer than 4.9.0; 4.9.0 and
// 4.9.0-RC1 are the same release, so neither is newer), else as text.
func Newer(stored, code string) bool {
	if c, ok := compareNumbers(stored, code); ok {
		return c > 0
	}
	return strings.Compare(stored, code) > 0
}
