package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/rules"
	"dataservice/store"
	"dataservice/store/model"
)

// dependentLoad is a load whose later entries depend on earlier ones: schemas it
// defines, instances it creates, updates, renames, deletes and references, a forward
// reference, collected addresses and an instance in use.
const dependentLoad = serverSchema + `
- {classname: _schema, keyname: rack, room: {dataformat: string}, peer: {dataformat: schema, dataformat_ext: rack}}
- {classname: site, keyname: s1, city: Paris}
- {classname: server, keyname: a, hostname: a.example, port: 22, mgmt_ip: 10.0.0.1, site: s1}
- {classname: server, keyname: a, hostname: a.example, port: 22, mgmt_ip: 10.0.0.1, site: s1}
- {classname: server, keyname: a, _action: update, port: 80}
- {classname: server, keyname: b, site: s2, mgmt_ip: 10.0.0.1}
- {classname: site, keyname: s2, city: Lyon}
- {classname: site, keyname: s1, _action: delete}
- {classname: server, keyname: a, _action: disable}
- {classname: server, keyname: c, hostname: c}
- {classname: server, keyname: c, _action: delete}
- {classname: server, keyname: c, _action: delete}
- {classname: server, keyname: c, _action: update, port: 1}
- {classname: server, keyname: d, site: s3}
- {classname: rack, keyname: r1, room: R}
- {classname: rack, keyname: r2, peer: r1}
- {classname: rack, keyname: r1, _action: update, room: R2}
- {classname: rack, keyname: r3, peer: r9}
- {classname: _schema, keyname: rack, _action: update, room: {dataformat: int}}
- {classname: rack, keyname: r4, room: 5}
- {classname: rack, keyname: r5, room: five}
- {classname: server, keyname: e, mgmt_ip: 10.0.0.9}
- {classname: ipam_ip, keyname: 10.0.0.9, _action: update, is_enabled: false}
`

// TestDryRunLoadInBatches: a dry run reports what a real load of the same entries
// reports (on a copy of the file), whatever the batch size it is given (it runs as one
// transaction in its private database), and writes nothing.
func TestDryRunLoadInBatches(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	before := queryInt(t, db, "SELECT count(*) FROM instances")
	want := load(t, copyOf(t, db), dependentLoad, store.LoadOptions{})
	if want.Created == 0 || want.Updated == 0 || want.Unchanged == 0 || want.Deleted == 0 || want.Disabled == 0 || want.Errors == 0 {
		t.Fatalf("the load does not exercise every outcome: %s\n%s", counts(want), messages(want))
	}
	for _, size := range []int{1, 2, 5, 1000} {
		got := load(t, db, dependentLoad, store.LoadOptions{DryRun: true, BatchSize: size})
		if counts(got) != counts(want) || messages(got) != messages(want) {
			t.Errorf("dry run in batches of %d:\n%s\n%s\nwant (real load):\n%s\n%s", size, counts(got), messages(got), counts(want), messages(want))
		}
		if n := queryInt(t, db, "SELECT count(*) FROM instances"); n != before {
			t.Fatalf("dry run in batches of %d left %d instances, want %d", size, n, before)
		}
		absent(t, db, "_schema", "rack")
	}
}

// TestDryRunLoadTakesNoWriter: held mid-run by a test hook, a dry-run load lets a
// real load through the same handle and one through a second handle of the file (its
// own connections, as another process has) commit; its report is still the one a
// real load of the same entries gives on a copy, and it leaves nothing behind: no
// instance in the file, no directory beside it.
//
// On PostgreSQL the directory is in TMPDIR, which the test makes its own (so it does
// not run in parallel: no other test's dry run is seen there).
func TestDryRunLoadTakesNoWriter(t *testing.T) {
	dryTempOfItsOwn(t)
	ctx := context.Background()
	db := dryShapeDB(t)
	var during []string // the database's directory while the dry run is held
	beside := func() []string { return dryDirsOf(t, db) }
	want := testkit.LoadEntries(t, copyOf(t, db), dryShapeEntries(t, "forward_refs", 2000), store.LoadOptions{})
	other := testkit.Open(t, store.AddressOf(db), testkit.Options{})
	held := 0
	db.SetDryRunHook(func(n int) {
		if n%500 != 0 {
			return
		}
		held++
		during = beside()
		// Were the writer held, these would wait for it until the deadline.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for i, h := range []*store.DB{db, other} {
			probe := parse(t, fmt.Sprintf("[{classname: dnode, keyname: probe%d_%d, n: 1}]", n, i))
			if res, err := h.Load(wctx, probe, store.LoadOptions{}); err != nil || res.Created != 1 {
				t.Errorf("a real load while the dry run is held at entry %d (handle %d): %+v, %v", n, i, res, err)
			}
		}
	})
	got, err := db.Load(ctx, dryShapeEntries(t, "forward_refs", 2000), store.LoadOptions{DryRun: true})
	db.SetDryRunHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	if held < 4 {
		t.Fatalf("the hook held the dry run %d times, want at least 4", held)
	}
	if counts(got) != counts(want) || messages(got) != messages(want) {
		t.Errorf("dry run:\n%s\n%s\nwant (real load):\n%s\n%s", counts(got), messages(got), counts(want), messages(want))
	}
	if n := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'dnode' AND keyname LIKE 'probe%'"); n != 2*held {
		t.Errorf("%d probe loads committed, want %d", n, 2*held)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'dnode' AND keyname LIKE 'f%'"); n != 0 {
		t.Errorf("the dry run wrote %d instances", n)
	}
	if len(during) != 1 {
		t.Errorf("while the dry run ran, beside the database: %q, want its one directory", during)
	}
	if left := beside(); len(left) != 0 {
		t.Errorf("the dry run left %q beside the database", left)
	}
}

// TestDryRunLoadWorkIsProportional: the work of a dry-run load per entry (snapshot rows
// looked up or read, statements run in its private database) does not grow with the
// number of entries, for every shape; rolled-back batches carrying their changes
// forward made it grow with the entries sharing a word.
func TestDryRunLoadWorkIsProportional(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, shape := range dryShapes {
		var per [2]float64
		for i, n := range []int{1000, 4000} {
			db := dryShapeDB(t)
			res, lookups, writes, err := store.DryRunWork(ctx, db, dryShapeEntries(t, shape, n), store.LoadOptions{})
			if err != nil {
				t.Fatalf("%s, %d entries: %v", shape, n, err)
			}
			if res.Errors != 0 || res.Created+res.Updated == 0 {
				t.Fatalf("%s, %d entries: %s\n%s", shape, n, counts(res), messages(res))
			}
			per[i] = float64(lookups+writes) / float64(n)
			t.Logf("%s: %d entries, %d lookups, %d statements, %.2f per entry", shape, n, lookups, writes, per[i])
		}
		if per[1] > 12 || per[1] > per[0]*1.05+0.25 {
			t.Errorf("%s: work per entry %.2f at 1000 entries, %.2f at 4000 (want at most 12, not growing)", shape, per[0], per[1])
		}
	}
}

// TestDryRunLoadMatchesRealLoad: over randomized loads mixing every kind of entry (see
// randomDryLoad), a dry run's counts, error messages and reported changes are those of
// a real load of the same entries on a copy, committed in batches of several sizes.
func TestDryRunLoadMatchesRealLoad(t *testing.T) {
	t.Parallel()
	compareRandomDryRuns(t, 12, 0)
}

// TestDryRunLoadKeyBound: with the keys it remembers in memory bounded to 3, a dry run
// (which then asks its private database what it has seen) still reports what the real
// load reports.
func TestDryRunLoadKeyBound(t *testing.T) {
	t.Parallel()
	compareRandomDryRuns(t, 6, 3)
	db := newTestDB(t)
	store.SetMaxDryKeys(db, 3)
	want := load(t, copyOf(t, db), dependentLoad, store.LoadOptions{})
	got := load(t, db, dependentLoad, store.LoadOptions{DryRun: true})
	if counts(got) != counts(want) || messages(got) != messages(want) {
		t.Errorf("dry run:\n%s\n%s\nwant (real load):\n%s\n%s", counts(got), messages(got), counts(want), messages(want))
	}
}

// compareRandomDryRuns compares rounds randomized dry runs with real loads (see
// TestDryRunLoadMatchesRealLoad), the dry runs remembering at most keyBound keys in
// memory (0: the default bound).
func compareRandomDryRuns(t *testing.T, rounds, keyBound int) {
	t.Helper()
	seed := testkit.Seed(t, "DRYRUN_SEED", 21)
	for round := range rounds {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		n := 150 + rng.IntN(250)
		db := dryShapeDB(t)
		store.SetMaxDryKeys(db, keyBound)
		mustLoad(t, db, randomDryBase(n), store.LoadOptions{})
		doc := randomDryLoad(rng, n)
		before := queryInt(t, db, "SELECT count(*) FROM instances")
		var wantLog, gotLog changeLog
		batch := []int{1, 7, 1000}[round%3]
		want := load(t, copyOf(t, db), doc, store.LoadOptions{BatchSize: batch, OnChange: wantLog.add})
		got := load(t, db, doc, store.LoadOptions{DryRun: true, OnChange: gotLog.add})
		if counts(got) != counts(want) || messages(got) != messages(want) {
			t.Fatalf("round %d: dry run:\n%s\n%s\nwant (real load in batches of %d):\n%s\n%s\nload:\n%s",
				round, counts(got), messages(got), batch, counts(want), messages(want), doc)
		}
		if gotLog.String() != wantLog.String() {
			t.Fatalf("round %d: the dry run reports other changes than the real load:\n%s\nwant:\n%s", round, gotLog.String(), wantLog.String())
		}
		if want.Created == 0 || want.Updated == 0 || want.Deleted == 0 || want.Errors == 0 {
			t.Fatalf("round %d does not exercise every outcome: %s", round, counts(want))
		}
		if n := queryInt(t, db, "SELECT count(*) FROM instances"); n != before {
			t.Fatalf("round %d: the dry run left %d instances, want %d", round, n, before)
		}
	}
}

// TestDryRunLoadLeavesReadPool: a dry run reads its snapshot on a connection of its
// own, so held mid-run it leaves a one-connection read pool to other readers.
func TestDryRunLoadLeavesReadPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, testkit.NewAddress(t, "one.db"), store.Options{ReadConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustLoad(t, db, dryShapeSchema+"- {classname: dnode, keyname: stored, n: 1}\n", store.LoadOptions{})
	reads := 0
	db.SetDryRunHook(func(n int) {
		// The read waits for a connection without a deadline of its own (its statement is
		// prepared once, uncancelled): give up on it after 10 s.
		done := make(chan error, 1)
		go func() {
			in, err := db.Instance(ctx, "dnode", "stored")
			if err == nil && in.Keyname != "stored" {
				err = fmt.Errorf("read %s", in.Keyname)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("a read while the dry run is held at entry %d: %v", n, err)
			}
			reads++
		case <-time.After(10 * time.Second):
			t.Errorf("a read while the dry run is held at entry %d waited 10 s for a connection", n)
		}
	})
	res := load(t, db, "- {classname: dnode, keyname: stored, n: 2}\n- {classname: dnode, keyname: new, peer: stored}\n", store.LoadOptions{DryRun: true})
	if counts(res) != "created=1 updated=1 unchanged=0 deleted=0 enabled=0 disabled=0 skipped=0 errors=0" || reads != 2 {
		t.Fatalf("dry run: %s, %d reads held", counts(res), reads)
	}
}

// TestDryRunLoadOnReadOnlyFile: a dry run needs no write access to the database: on a
// file opened read-only (on PostgreSQL, a database opened read-only: every
// transaction read-only) it reports what a real load reports and leaves the file's
// bytes (the database's rows) as they were.
func TestDryRunLoadOnReadOnlyFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dryShapeDB(t)
	want := testkit.LoadEntries(t, copyOf(t, db), dryShapeEntries(t, "forward_refs", 300), store.LoadOptions{})
	path := store.AddressOf(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	// The file's bytes; on PostgreSQL (every transaction of the handle read-only), the
	// instances' rows and the bookkeeping.
	contents := func() string {
		if !testkit.Postgres() {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		return queryString(t, ro, `SELECT (SELECT count(*) FROM instances) || ' ' || (SELECT coalesce(max(id), 0) FROM instances)
			|| ' ' || (SELECT high FROM instance_ids) || ' ' || (SELECT count(*) FROM revisions)
			|| ' ' || (SELECT coalesce(md5(string_agg(keyname || CAST(data AS TEXT) || updated_at, ',' ORDER BY id)), '') FROM instances)`)
	}
	before := contents()
	got, err := ro.Load(ctx, dryShapeEntries(t, "forward_refs", 300), store.LoadOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if counts(got) != counts(want) || messages(got) != messages(want) {
		t.Errorf("dry run on a read-only file:\n%s\n%s\nwant (real load):\n%s\n%s", counts(got), messages(got), counts(want), messages(want))
	}
	if after := contents(); after != before {
		t.Error("the dry run changed the database")
	}
}

// TestDryRunLoadWithPipeline: a dry run through a load-time pipeline (which here
// rewrites references to stored objects and deletes some entries) reports what the
// real load through it reports.
func TestDryRunLoadWithPipeline(t *testing.T) {
	t.Parallel()
	db := dryShapeDB(t)
	mustLoad(t, db, "- {classname: dnode, keyname: hub, n: 1}\n- {classname: dnode, keyname: a1, n: 1}\n", store.LoadOptions{})
	tr, err := rules.LoadTransform(`
- field_set: ['', peer, hub]
- field_upper: ['', tag]
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := `
- {classname: dnode, keyname: a1, n: 2, tag: x}
- {classname: dnode, keyname: a2, tag: y}
- {classname: dnode, keyname: hub, _action: delete}
- {classname: dnode, keyname: a3, tag: z}
`
	var wantLog, gotLog changeLog
	want := load(t, copyOf(t, db), doc, store.LoadOptions{Transform: tr, OnChange: wantLog.add})
	got := load(t, db, doc, store.LoadOptions{Transform: tr, DryRun: true, OnChange: gotLog.add})
	if counts(got) != counts(want) || messages(got) != messages(want) || gotLog.String() != wantLog.String() {
		t.Errorf("dry run:\n%s\n%s\n%s\nwant (real load):\n%s\n%s\n%s", counts(got), messages(got), gotLog.String(),
			counts(want), messages(want), wantLog.String())
	}
	if want.Errors == 0 || want.Updated == 0 || want.Created == 0 {
		t.Fatalf("the load does not exercise the reference the pipeline sets: %s\n%s", counts(want), messages(want))
	}
}

// TestDryRunRenameSeesSnapshotReferences: in a dry run's transaction, a cascading
// rename of an object referenced by instances the run never named checks and rewrites
// the references the snapshot holds, as in the database itself: refused for a caller
// who may not update a class holding one, the same references rewritten otherwise
// (a load's entries never rename today; the apply path they share does). Also with
// the keys a dry run remembers bounded to one.
func TestDryRunRenameSeesSnapshotReferences(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _permission, keyname: p_locked_update}
- {classname: _schema, keyname: place}
- {classname: _schema, keyname: locked, p_update: p_locked_update, at: {dataformat: schema, dataformat_ext: place}}
- {classname: _schema, keyname: free, at: {dataformat: schema, dataformat_ext: place, cardinal_max: 0}}
- {classname: place, keyname: p1}
- {classname: place, keyname: p2}
- {classname: locked, keyname: l1, at: p1}
- {classname: free, keyname: f1, at: [p2, p1]}
- {classname: free, keyname: f2, at: [p2]}
- {classname: free, keyname: f3, at: [p2, p2]}
- {classname: free, keyname: f4, at: [p1]}
`, store.LoadOptions{})
	// rename renames place from to to as the caller auth, f4 updated first (a row the
	// run has named), and reports the outcome and the references to to afterwards.
	rename := func(tx *store.Tx, auth *model.Auth, from, to string) string {
		s, err := tx.Schema(ctx, "place")
		if err != nil {
			t.Fatal(err)
		}
		fs, err := tx.Schema(ctx, "free")
		if err != nil {
			t.Fatal(err)
		}
		f4, err := tx.Instance(ctx, "free", "f4")
		if err != nil {
			t.Fatal(err)
		}
		next4 := *f4
		next4.Data = map[string]any{"at": []any{from, "p1"}}
		if _, err := tx.Apply(ctx, store.Write{Schema: fs, Old: f4, New: &next4, Action: model.ActionUpdate}, store.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		old, err := tx.Instance(ctx, "place", from)
		if err != nil {
			t.Fatal(err)
		}
		next := *old
		next.Keyname = to
		out, err := tx.Apply(ctx, store.Write{Schema: s, Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{Auth: auth})
		var refs []string
		for _, cls := range []string{"locked", "free"} {
			for i := 1; i <= 4; i++ {
				in, err := tx.Instance(ctx, cls, fmt.Sprint(cls[:1], i))
				if store.IsNotFound(err) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				refs = append(refs, fmt.Sprintf("%s=%v", in.Keyname, in.Data["at"]))
			}
		}
		return fmt.Sprintf("%s renamed=%v err=%v refs=%v", out.Result, out.Renamed, err, refs)
	}
	cases := []struct {
		auth     *model.Auth
		from, to string
		want     string // in the real database
	}{
		{userAuth("p_data_update", "p_data_read", "p_keyname_rename"), "p1", "p1new", "permission denied: renaming place p1 would rewrite references in locked"},
		{userAuth("p_data_update", "p_data_read", "p_keyname_rename"), "p2", "p2new", "refs=[l1=p1 f1=[p2new p1] f2=[p2new] f3=[p2new p2new] f4=[p2new p1]]"},
		{nil, "p1", "p1new", "refs=[l1=p1new f1=[p2 p1new] f2=[p2] f3=[p2 p2] f4=[p1new p1new]]"},
	}
	for _, c := range cases {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := rename(tx, c.auth, c.from, c.to)
		tx.Rollback()
		if !strings.Contains(want, c.want) {
			t.Fatalf("rename %s in the database: %s, want %s", c.from, want, c.want)
		}
		// Also with one key remembered in memory (the private database is asked then).
		for _, bound := range []int{0, 1} {
			var got string
			store.SetMaxDryKeys(db, bound) // 0: the default bound
			err := store.DryRunTx(ctx, db, func(tx *store.Tx) error { got = rename(tx, c.auth, c.from, c.to); return nil })
			store.SetMaxDryKeys(db, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("rename %s in a dry run (key bound %d):\n%s\nwant (in the database):\n%s", c.from, bound, got, want)
			}
		}
	}
}
