package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"dataservice/store"
)

// copy: dataservice copy --from SRC --to DST — move a whole database to another
// (SQLite to PostgreSQL, the reverse, or file to file). SRC is opened read-only and
// never written; DST must be empty (a new file, or a new PostgreSQL database): it is
// created or given the table layout, then filled in one transaction that is rolled
// back on any failure, after every table's count and checksum matched the source's.
func setupCopy(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	from := fs.String("from", "", "the database to copy: a SQLite file or a postgres:// URL (read only)")
	to := fs.String("to", "", "the new, empty database to fill: a SQLite file or a postgres:// URL")
	c.sf.quiet = true
	fs.StringVar(&c.sf.logLevel, "log-level", "", "debug, info, warn or error (SERVICE_LOG_LEVEL; default warn)")
	return func(ctx context.Context, _ []string) error {
		if *from == "" || *to == "" {
			return &usageError{c.find("copy"), "copy needs --from and --to"}
		}
		s, err := loadSettings(c.getenv, &c.sf)
		if err != nil {
			return err
		}
		log := c.logger(s)
		src, err := store.Open(ctx, *from, store.Options{Logger: log, ReadOnly: true, SecretKeyFile: s.SecretKeyFile})
		if errors.Is(err, store.ErrLayoutPending) {
			return fmt.Errorf("copy from %s: %w: %s", store.RedactURL(*from), err, runMigrate)
		}
		if err != nil {
			return fmt.Errorf("copy from: %w", err)
		}
		defer src.Close()
		dst, err := store.Open(ctx, *to, store.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("copy to: %w", err)
		}
		defer dst.Close()
		fmt.Fprintf(c.stdout, "copying %s (%s) to %s (%s)\n", src.Path(), src.Engine(), dst.Path(), dst.Engine())
		var total int64
		_, err = store.Copy(ctx, src, dst, func(t store.CopiedTable) {
			total += t.Rows
			fmt.Fprintf(c.stdout, "%-20s %10d rows  checksum %s  verified\n", t.Name, t.Rows, t.Sum)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "copied %d rows; every table's count and checksum match the source\n", total)
		c.tellSealed(ctx, src, "copied", "the target opens them only with the source's key file (%s): "+
			"put it where the target looks for its key, or set the secrets again")
		return nil
	}
}

// tellSealed prints one line when db holds encrypted secrets (event rules' signing
// secrets): how many a command moved (verb) sealed, then advice, whose %s is the key
// file they open with, which no command moves. Nothing when there are none, or when
// they cannot be counted (the command itself succeeded).
func (c *cli) tellSealed(ctx context.Context, db *store.DB, verb, advice string) {
	if n, err := db.SealedSecrets(ctx); err == nil && n > 0 {
		fmt.Fprintf(c.stdout, "encrypted secrets %s sealed: %d; %s (docs/events.md, The signing key)\n",
			verb, n, fmt.Sprintf(advice, db.SecretKeyFile()))
	}
}
