package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// Searches stay exact while the index lags behind the writes: random loads (creates,
// updates, deletes) interleaved with random searches compared with a scan, the
// catch-up running in the background in one half and not at all in the other, the
// backlog crossing a (lowered) fallback limit on the way; what was just written is
// found and what was just removed is not. At the end the catch-up leaves an index
// equal to a rebuilt one.
func TestSearchExactWhileIndexLags(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: _schema, keyname: vault, text: {dataformat: string}, pw: {dataformat: secret}}
`, store.LoadOptions{System: true})
	r := rand.New(rand.NewPCG(26, 1))
	var stored []string
	var keys []map[string]any
	load := func(v []map[string]any) {
		t.Helper()
		body, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		mustLoad(t, db, string(body), store.LoadOptions{System: true})
	}
	next := 0
	entry := func() map[string]any {
		next++
		cls := "note"
		if next%3 == 0 {
			cls = "vault"
		}
		e := map[string]any{"classname": cls, "keyname": fmt.Sprintf("k%d", next),
			"displayname": randText(r, r.IntN(8)), "text": randText(r, r.IntN(12))}
		stored = append(stored, e["displayname"].(string), e["text"].(string))
		keys = append(keys, map[string]any{"classname": cls, "keyname": e["keyname"]})
		return e
	}
	var first []map[string]any
	for range 150 {
		first = append(first, entry())
	}
	load(first)
	// Below 60 listed rows a search checks them; above, it reads every row.
	store.SetSearchBacklogLimit(db, 60)

	// The catch-up runs in the background for the first rounds only.
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		db.RunSearchCatchUp(bg, nil)
	}()
	for round := range 24 {
		if round == 12 {
			stop()
			wg.Wait()
		}
		var batch []map[string]any
		for range 1 + r.IntN(50) {
			switch k := r.IntN(4); {
			case k == 0 || len(keys) < 20:
				batch = append(batch, entry())
			case k == 1:
				i := r.IntN(len(keys))
				e := map[string]any{"classname": keys[i]["classname"], "keyname": keys[i]["keyname"], "_action": "delete"}
				keys = slices.Delete(keys, i, i+1)
				batch = append(batch, e)
			default:
				i := r.IntN(len(keys))
				e := map[string]any{"classname": keys[i]["classname"], "keyname": keys[i]["keyname"], "text": randText(r, 9)}
				stored = append(stored, e["text"].(string))
				batch = append(batch, e)
			}
		}
		load(batch)
		compareSearchNow(t, db, r, stored, fmt.Sprintf("round %d", round), 20)
		// Some rounds stage what is listed (as the catch-up does ahead of a large
		// backlog): the next rounds' writes unstage part of it, and the searches read
		// staged copies, listed rows and the index together.
		if r.IntN(3) == 0 {
			if _, err := db.StageSearch(ctx); err != nil {
				t.Fatal(err)
			}
			compareSearchNow(t, db, r, stored, fmt.Sprintf("round %d, staged", round), 20)
		}
		if db.IsFile() {
			testkit.CheckSearchIndex(t, db.Path(), fmt.Sprintf("round %d", round))
		}
	}
	stop()
	wg.Wait()

	// Read your writes: a keyname written a moment ago is found, a value just replaced
	// is not, whether or not the index holds the row.
	note, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	load([]map[string]any{{"classname": "note", "keyname": "fresh-needle", "text": "zebra-unique"}})
	if ids, _ := listIDs(t, db, note, store.ListQuery{Search: "fresh-needle", Limit: 10}); len(ids) != 1 {
		t.Fatalf("a keyname just written: the search finds %v", ids)
	}
	caughtUp := time.Now()
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	load([]map[string]any{{"classname": "note", "keyname": "fresh-needle", "text": "plain"}})
	if ids, _ := listIDs(t, db, note, store.ListQuery{Search: "zebra-unique", Limit: 10}); len(ids) != 0 {
		t.Fatalf("a value just replaced: the search still finds %v", ids)
	}
	if db.IsFile() {
		// The row was listed after the catch-up found the list empty: the lag counts
		// from that moment, no earlier and no later.
		if lag, err := db.SearchLag(ctx); err != nil || lag.Rows != 1 || lag.Since.Before(caughtUp) || lag.Since.After(written) {
			t.Fatalf("lag %+v, %v: want the one row just written, listed after %v and before %v", lag, err, caughtUp, written)
		}
	}
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if lag, err := db.SearchLag(ctx); err != nil || lag.Rows != 0 {
		t.Fatalf("lag %+v, %v after the catch-up", lag, err)
	}
	if db.IsFile() {
		testkit.CheckSearchIndexCaughtUp(t, db.Path(), "after the catch-up")
	}
	compareSearchNow(t, db, r, stored, "caught up", 40)
}

// Above the backlog limit a search reads every row of its schema, exactly as below it,
// and the store logs it once per episode: once when it starts, once when the index is
// usable again, and once more at the next episode.
func TestSearchFallsBackAboveBacklogLimit(t *testing.T) {
	testkit.SQLiteOnly(t, "the backlog is SQLite's: PostgreSQL's engine maintains its index in every write")
	t.Parallel()
	ctx := context.Background()
	path := store.AddressOf(newTestDB(t))
	logs := &testkit.Buffer{}
	db := testkit.Open(t, path, testkit.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	mustLoad(t, db, "- {classname: _schema, keyname: note, text: {dataformat: string}}\n", store.LoadOptions{System: true})
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	store.SetSearchBacklogLimit(db, 5)
	note, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	write := func(from int) {
		t.Helper()
		var doc strings.Builder
		for i := from; i < from+8; i++ {
			fmt.Fprintf(&doc, "- {classname: note, keyname: n%d, text: needle-%d}\n", i, i)
		}
		mustLoad(t, db, doc.String(), store.LoadOptions{System: true})
	}
	find := func(want int) {
		t.Helper()
		if ids, res := listIDs(t, db, note, store.ListQuery{Search: "needle", Limit: 100}); len(ids) != want || res.Count != want {
			t.Fatalf("search finds %d (count %d), want %d", len(ids), res.Count, want)
		}
	}
	const fell, again = "the search index lags too far behind", "search uses the search index again"
	write(0) // 8 listed: above 5
	find(8)
	find(8)
	if n := strings.Count(logs.String(), fell); n != 1 || !strings.Contains(logs.String(), "rows_behind_at_least=") {
		t.Fatalf("%d fallback warnings after two searches, want 1:\n%s", n, logs.String())
	}
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	find(8)
	find(8)
	if n := strings.Count(logs.String(), again); n != 1 {
		t.Fatalf("%d notes of the index used again, want 1:\n%s", n, logs.String())
	}
	write(8)
	find(16)
	if n := strings.Count(logs.String(), fell); n != 2 {
		t.Fatalf("%d fallback warnings after the second episode, want 2:\n%s", n, logs.String())
	}
}

// TestSearchCatchUpWithoutTurnstile: a writable file whose turnstile cannot be opened
// (made by another user, here a directory in its place) is written without the
// turnstile, and its search index still catches up: only a file opened read-only has
// no catch-up.
func TestSearchCatchUpWithoutTurnstile(t *testing.T) {
	testkit.SQLiteOnly(t, "the search index is SQLite's own; PostgreSQL's engine maintains pg_trgm")
	t.Parallel()
	ctx := context.Background()
	path := store.AddressOf(newTestDB(t))
	if err := os.Remove(path + "-wait"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path+"-wait", 0o700); err != nil {
		t.Fatal(err)
	}
	db := testkit.Open(t, path, testkit.Options{})
	mustLoad(t, db, "- {classname: _schema, keyname: note, text: {dataformat: string}}\n- {classname: note, keyname: n1, text: needle}\n",
		store.LoadOptions{System: true})
	if lag, err := db.SearchLag(ctx); err != nil || lag.Rows == 0 {
		t.Fatalf("before the catch-up: %d rows behind (%v), want some", lag.Rows, err)
	}
	if n, err := db.CatchUpSearch(ctx); err != nil || n == 0 {
		t.Fatalf("CatchUpSearch indexed %d rows (%v) on a writable file without a turnstile", n, err)
	}
	if lag, err := db.SearchLag(ctx); err != nil || lag.Rows != 0 {
		t.Fatalf("after the catch-up: %d rows behind (%v), want 0", lag.Rows, err)
	}
}
