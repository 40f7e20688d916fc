package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"dataservice/store"
)

// Write transactions whose context is canceled at random points (a client that goes
// away mid-request), including in the middle of the commit's re-indexing, leave the
// search index intact and equal to a rebuilt one.
func TestSearchIndexSurvivesCanceledCommits(t *testing.T) {
	db := newTestDB(t)
	mustLoad(t, db, `- {classname: _schema, keyname: note, text: {dataformat: string}}`, store.LoadOptions{System: true})
	r := rand.New(rand.NewPCG(16, 3))
	canceled := 0
	maxDelayUS := 3000
	if v, err := strconv.Atoi(os.Getenv("ZZDELAY")); err == nil {
		maxDelayUS = v
	}
	for round := range 60 {
		ctx, cancel := context.WithCancel(context.Background())
		tx, err := db.Begin(ctx)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		for i := range 300 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO instances(classname, keyname, data, created_at, updated_at)
				VALUES('note', ?, ?, '', '')`, fmt.Sprintf("r%d-%d", round, i), fmt.Sprintf(`{"text":"round %d item %d %s"}`, round, i, randText(r, 20))); err != nil {
				break
			}
		}
		tx.ExecContext(ctx, "UPDATE instances SET data = json_set(data, '$.text', 'x' || id) WHERE classname = 'note' AND id % 7 = ?", round%7)
		tx.ExecContext(ctx, "DELETE FROM instances WHERE classname = 'note' AND id % 13 = ?", round%13)
		delay := time.Duration(r.IntN(maxDelayUS)) * time.Microsecond
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
	checkSearchIndex(t, db.Path(), "after canceled commits")
}
