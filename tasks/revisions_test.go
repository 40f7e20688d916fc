package tasks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// revisionIDs lists the ids of host key's revisions, oldest first.
func revisionIDs(t *testing.T, db *store.DB, key string) []int64 {
	t.Helper()
	_, rows := testkit.Rows(t, db, "SELECT id FROM revisions WHERE classname = 'host' AND keyname = ? ORDER BY id", key)
	var ids []int64
	for _, r := range rows {
		var id int64
		if _, err := fmt.Sscan(fmt.Sprint(r[0]), &id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// writeRevisions gives host key n more revisions (a create, then updates).
func writeRevisions(t *testing.T, db *store.DB, key string, n int) {
	t.Helper()
	for i := range n {
		mustLoad(t, db, fmt.Sprintf("- classname: host\n  keyname: %s\n  note: n%d-%d\n", key, time.Now().UnixNano(), i))
	}
}

// ageRevisions makes every revision written so far days old.
func ageRevisions(t *testing.T, db *store.DB, days int) {
	t.Helper()
	old := time.Now().UTC().AddDate(0, 0, -days).Format(time.RFC3339)
	testkit.ExecAll(t, db, "UPDATE revisions SET created_at = '"+old+"'")
}

func TestRevisionRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	writeRevisions(t, db, "all-old", 6) // a create and 5 updates, the latest old too
	writeRevisions(t, db, "old-then-new", 3)
	writeRevisions(t, db, "deleted", 1)
	mustLoad(t, db, "- classname: host\n  keyname: deleted\n  _action: delete\n")
	ageRevisions(t, db, 100)
	writeRevisions(t, db, "old-then-new", 1)
	writeRevisions(t, db, "new", 2)
	before := map[string][]int64{}
	for _, k := range []string{"all-old", "old-then-new", "deleted", "new"} {
		before[k] = revisionIDs(t, db, k)
	}
	if got := len(before["all-old"]); got != 6 {
		t.Fatalf("set-up: all-old has %d revisions, want 6", got)
	}
	r := newRunner(t, db, tasks.Options{})

	t.Run("0, the default, keeps every revision", func(t *testing.T) {
		if got := db.ConfigValue(ctx, store.ConfigRevisionRetention); got != "0" {
			t.Fatalf("REVISION_RETENTION_DAYS = %s, want the default 0", got)
		}
		n, more, err := r.PurgeRevisions(ctx)
		if err != nil || n != 0 || more {
			t.Fatalf("PurgeRevisions = %d, %v, %v; want 0, false, nil", n, more, err)
		}
	})

	t.Run("older revisions go, each object's latest stays", func(t *testing.T) {
		if err := db.SetConfig(ctx, map[string]string{store.ConfigRevisionRetention: "30"}); err != nil {
			t.Fatal(err)
		}
		n, more, err := r.PurgeRevisions(ctx)
		if err != nil || more {
			t.Fatalf("PurgeRevisions: more %v, err %v", more, err)
		}
		// all-old: 5 of 6; old-then-new: its 3 old ones; deleted: the create.
		if n != 9 {
			t.Errorf("deleted %d revisions, want 9", n)
		}
		last := func(ids []int64) []int64 { return ids[len(ids)-1:] }
		want := map[string][]int64{
			"all-old":      last(before["all-old"]),
			"old-then-new": last(before["old-then-new"]),
			"deleted":      last(before["deleted"]),
			"new":          before["new"],
		}
		for k, w := range want {
			if got := revisionIDs(t, db, k); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s keeps revisions %v, want %v", k, got, w)
			}
		}
		if got, err := db.ObjectReplacedSince(ctx, "host", "deleted", 0); err != nil || got != "delete" {
			t.Errorf("the deleted instance's history: %q, %v; want its delete revision kept", got, err)
		}
	})
}

func TestRevisionRetentionIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	const objects = 5
	for i := range objects {
		writeRevisions(t, db, fmt.Sprintf("h%d", i), 4) // 3 deletable each: 15 in all
	}
	ageRevisions(t, db, 40)
	if err := db.SetConfig(ctx, map[string]string{store.ConfigRevisionRetention: "30"}); err != nil {
		t.Fatal(err)
	}
	total := func() int { return queryInt(t, db, "SELECT count(*) FROM revisions WHERE classname = 'host'") }

	t.Run("one transaction deletes at most its batch", func(t *testing.T) {
		n, next, err := db.PurgeRevisionsBatch(ctx, time.Now().AddDate(0, 0, -30), 0, 2)
		if err != nil || n != 2 || next == 0 {
			t.Fatalf("PurgeRevisionsBatch = %d, %d, %v; want 2 deleted and a cursor", n, next, err)
		}
		if got := total(); got != objects*4-2 {
			t.Fatalf("%d revisions left, want %d", got, objects*4-2)
		}
	})

	t.Run("one clean-up deletes at most RevisionBatch × RevisionBatches, the next goes on", func(t *testing.T) {
		r := newRunner(t, db, tasks.Options{RevisionBatch: 2, RevisionBatches: 3})
		var calls []string
		for range 5 {
			n, more, err := r.PurgeRevisions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, fmt.Sprintf("%d/%v", n, more))
			if !more {
				break
			}
		}
		// 13 deletable left: 6, 6, then the last one and the end of the history.
		if got, want := strings.Join(calls, " "), "6/true 6/true 1/false"; got != want {
			t.Fatalf("clean-ups deleted (count/more): %s, want %s", got, want)
		}
		if got := total(); got != objects {
			t.Fatalf("%d revisions left, want %d (one per instance)", got, objects)
		}
	})

	t.Run("Run cleans up at start", func(t *testing.T) {
		writeRevisions(t, db, "h0", 2)
		ageRevisions(t, db, 40)
		r := newRunner(t, db, tasks.Options{})
		stop := startRun(t, r)
		defer stop()
		waitFor(t, "Run to purge old revisions", func() bool { return total() == objects })
	})
}
