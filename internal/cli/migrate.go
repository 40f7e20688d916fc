package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"dataservice/bootstrap"
	"dataservice/store"
)

func setupMigrate(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, true)
	status := fs.Bool("status", false, "only print DB_VERSION, SERVICE_VERSION and pending blocks; change nothing")
	return func(ctx context.Context, _ []string) error {
		if *status {
			return c.migrateStatus(ctx)
		}
		db, s, _, err := c.openStartUp(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		dbv, _ := db.Registry(ctx, store.RegDBVersion)
		fmt.Fprintf(c.stdout, "DB_VERSION %s (SERVICE_VERSION %s)\n", dbv, s.Version)
		return nil
	}
}

// migrateStatus reports and changes nothing: on a path with no database, or an empty
// file, it creates none, and it applies no table layout step.
func (c *cli) migrateStatus(ctx context.Context) error {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return err
	}
	path := s.DB
	// A file may be missing or empty; a PostgreSQL database exists or its server
	// says why not (an empty one reports its pending layout steps).
	var missing, empty bool
	if store.IsFileAddr(s.DB) {
		st, err := os.Stat(s.DB)
		missing = errors.Is(err, os.ErrNotExist)
		empty = err == nil && st.Mode().IsRegular() && st.Size() == 0
	}
	if missing || empty {
		// Nothing to create at the path: report what a new database would run, computed
		// on a scratch file that is removed afterwards.
		if err := checkDBPath(s.DB); err != nil && !errors.Is(err, errReadOnlyFile) {
			return err
		}
		tmp, err := os.MkdirTemp("", "dataservice-status-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		path = filepath.Join(tmp, "empty.db")
	}
	scratch := missing || empty
	err = checkDBPath(s.DB)
	readOnly := errors.Is(err, errReadOnlyFile)
	if err != nil && !readOnly {
		return err
	}
	db, err := store.Open(ctx, path, store.Options{Logger: c.logger(s), ReadOnly: readOnly && !scratch,
		AsIs: !readOnly && !scratch})
	if errors.Is(err, store.ErrLayoutPending) {
		// The registry of an older layout is not read: migrate applies the layout steps,
		// then the blocks its DB_VERSION needs.
		_, detail, _ := strings.Cut(err.Error(), store.ErrLayoutPending.Error())
		fmt.Fprintf(c.stdout, "DB_VERSION: (not read: table layout steps pending)\nSERVICE_VERSION: %s\n"+
			"pending: table layout steps%s, then the migration blocks of its DB_VERSION\n", s.Version, detail)
		return nil
	}
	if err != nil {
		return err
	}
	defer db.Close()
	dbv, pending, err := bootstrap.Pending(ctx, db, s.Version)
	if err != nil {
		return err
	}
	switch {
	case missing:
		dbv = fmt.Sprintf("(none: no database at %s; the first start creates it)", s.DB)
	case dbv == "":
		dbv = "(none: empty database)"
	}
	fmt.Fprintf(c.stdout, "DB_VERSION: %s\nSERVICE_VERSION: %s\n", dbv, s.Version)
	if len(pending) == 0 {
		fmt.Fprintln(c.stdout, "pending: none")
	} else {
		fmt.Fprintf(c.stdout, "pending: %s\n", strings.Join(pending, ", "))
	}
	return nil
}
