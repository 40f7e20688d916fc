package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// nextInstanceID is an id above every instance's id and the high-water mark, in SQL
// both engines run (instances inserted by SQL outside Apply need one: PostgreSQL's
// layout gives none by default).
const nextInstanceID = `(SELECT max(v) + 1 FROM (SELECT high AS v FROM instance_ids UNION ALL SELECT max(id) FROM instances) m)`

// Write transactions whose context is canceled at random points (a client that goes
// away mid-request), including in the middle of the commit's re-indexing, leave the
// search index intact and equal to a rebuilt one.
func TestSearchIndexSurvivesCanceledCommits(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `- {classname: _schema, keyname: note, text: {dataformat: string}}`, store.LoadOptions{System: true})
	r := rand.New(rand.NewPCG(16, 3))
	canceled := 0
	for round := range 60 {
		ctx, cancel := context.WithCancel(context.Background())
		tx, err := db.Begin(ctx)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		for i := range 300 {
			// The context is canceled only later, at the commit: an insert fails for no
			// reason of the test's.
			if err := store.ExecInTx(ctx, tx, `INSERT INTO instances(id, classname, keyname, data, created_at, updated_at)
				VALUES(`+nextInstanceID+`, 'note', ?, ?, '', '')`, fmt.Sprintf("r%d-%d", round, i), jsonText(t, map[string]any{"text": fmt.Sprintf("round %d item %d %s", round, i, randText(r, 20))})); err != nil {
				cancel()
				t.Fatal(err)
			}
		}
		store.ExecInTx(ctx, tx, "UPDATE instances SET displayname = 'x' || id WHERE classname = 'note' AND id % 7 = ?", round%7)
		store.ExecInTx(ctx, tx, "DELETE FROM instances WHERE classname = 'note' AND id % 13 = ?", round%13)
		delay := time.Duration(r.IntN(20000)) * time.Microsecond // up to the commit and past it
		go func() {
			time.Sleep(delay)
			cancel()
		}()
		if err := tx.Commit(); err != nil {
			canceled++
		}
		tx.Rollback()
		cancel()
	}
	t.Logf("%d of 60 commits canceled", canceled)
	checkSearchIndex(t, db, "after canceled commits")
	s, err := db.Schema(context.Background(), "note")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"round 1", "item 2", "x1", "é_", randText(r, 3), randText(r, 4)} {
		want := likeIDs(t, db, "note", q, true)
		got, _ := listIDs(t, db, s, store.ListQuery{Search: q, Limit: 100000})
		if !slices.Equal(got, want) {
			t.Fatalf("search %q after canceled commits: %d matches, the scan %d", q, len(got), len(want))
		}
	}
}

// A pooled read connection that searched before other connections wrote still finds
// exactly what LIKE finds afterwards (FTS5 re-reads the index's structure for each
// new query). Only FTS5's integrity check reuses the structure the connection cached:
// on such a connection it reports a checksum mismatch in a sound file (logged here),
// which is why the integrity checks of the tests run on fresh connections.
func TestSearchIndexFreshOnPooledReaders(t *testing.T) {
	testkit.SQLiteOnly(t, "FTS5's cached index structure and its integrity check")
	t.Parallel()
	ctx := context.Background()
	db, err := testkit.OpenStore(t, filepath.Join(t.TempDir(), "pool.db"), store.Options{ReadConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustLoad(t, db, `- {classname: _schema, keyname: note, text: {dataformat: string}}`, store.LoadOptions{System: true})
	s, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	search := func(q string) {
		t.Helper()
		want := likeIDs(t, db, "note", q, true)
		got, _ := listIDs(t, db, s, store.ListQuery{Search: q, Limit: 10000})
		if !slices.Equal(got, want) {
			t.Fatalf("search %q: %d matches, LIKE %d", q, len(got), len(want))
		}
	}
	search("row")
	for i := range 300 {
		exec(t, db, `INSERT INTO instances(classname, keyname, data, created_at, updated_at) VALUES('note', ?, ?, '', '')`,
			fmt.Sprintf("row-%d", i), fmt.Sprintf(`{"text":"row %d text %d"}`, i, i*7))
		if i%10 == 9 {
			exec(t, db, "DELETE FROM instances WHERE classname = 'note' AND keyname = ?", fmt.Sprintf("row-%d", i-3))
		}
	}
	var stale string
	if err := db.Reader().QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&stale); err != nil {
		t.Fatal(err)
	}
	t.Logf("integrity_check on the reader that searched before the writes: %s", stale)
	search("row")
	search("text 1")
	checkSearchIndex(t, db, "fresh connection")
}

// jsonText is v as JSON text.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
