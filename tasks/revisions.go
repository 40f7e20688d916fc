package tasks

import (
	"context"

	"dataservice/store"
)

// PurgeRevisions deletes revisions older than REVISION_RETENTION_DAYS (0, the default,
// keeps them all), in transactions of at most Options.RevisionBatch rows and at most
// Options.RevisionBatches of them: a history of millions of rows is worked off over
// several clean-ups, never in one long write that stalls the others. An instance's
// latest revision is always kept (store.DB.PurgeRevisionsBatch). It returns how many
// it deleted and whether older revisions may remain (the bound was reached).
func (r *Runner) PurgeRevisions(ctx context.Context) (deleted int64, more bool, err error) {
	days := r.db.ConfigInt(ctx, store.ConfigRevisionRetention)
	if days <= 0 {
		return 0, false, nil
	}
	cutoff := r.db.Now().UTC().AddDate(0, 0, -days)
	var after int64
	for range r.o.RevisionBatches {
		n, next, err := r.db.PurgeRevisionsBatch(ctx, cutoff, after, r.o.RevisionBatch)
		deleted += n
		if err != nil {
			return deleted, true, err
		}
		if next == 0 {
			return deleted, false, nil
		}
		after = next
	}
	return deleted, true, nil
}

// purgeRevisions is PurgeRevisions for the scheduled clean-up: it logs what it did.
func (r *Runner) purgeRevisions(ctx context.Context) {
	n, more, err := r.PurgeRevisions(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Error("purge revisions", "error", err, "count", n)
	case n > 0:
		r.log.Info("purged old revisions", "count", n, "more_left", more)
	}
}
