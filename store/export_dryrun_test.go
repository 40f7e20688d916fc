package store

import "context"

// DryRunWork runs a dry-run load of entries on db and returns its result with the
// work it did: the snapshot rows it looked up or read and the statements it ran in
// its private database (copies and the load's own writes).
func DryRunWork(ctx context.Context, db *DB, entries []*Entry, opts LoadOptions) (*LoadResult, int, int, error) {
	opts.DryRun = true
	d, err := newDryRun(ctx, db)
	if err != nil {
		return nil, 0, 0, err
	}
	defer d.close()
	res, _, err := d.priv.loadStream(ctx, func(yield func(*Entry) error) error {
		for _, e := range entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}, opts, d)
	writes := 0
	if d.tx != nil {
		writes = d.tx.writes
	}
	return res, d.lookups, writes, err
}

// SetMaxDryKeys lowers the number of keys a dry run remembers in memory, for a test;
// it returns the old value.
func SetMaxDryKeys(n int) int {
	old := maxDryKeys
	maxDryKeys = n
	return old
}
