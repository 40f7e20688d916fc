package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// dryShapeSchema is the class the dry-run shapes load into: a text, a number, a
// reference to another object of the class and an address (collected as ipam_ip).
const dryShapeSchema = `
- {classname: _schema, keyname: dnode, tag: {dataformat: string}, n: {dataformat: int},
   peer: {dataformat: schema, dataformat_ext: dnode}, addr: {dataformat: ipv4}}
`

// dryShapes are the shapes of load a dry run must cost in proportion to: every entry
// distinct; every entry sharing one word (the quadratic case of rolled-back batches
// carrying their rows forward); the first half referencing the second half (forward
// references, resolved by the retry pass); and _schema entries first, then instances
// of those classes.
var dryShapes = []string{"distinct", "shared_word", "forward_refs", "schema_first"}

// dryShape builds n entries of shape (the schema entries of schema_first included).
func dryShape(shape string, n int) []map[string]any {
	out := make([]map[string]any, 0, n)
	switch shape {
	case "distinct":
		for i := range n {
			out = append(out, map[string]any{"classname": "dnode", "keyname": fmt.Sprintf("d%d", i),
				"tag": fmt.Sprintf("tag%d", i), "n": i, "addr": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)})
		}
	case "shared_word":
		for i := range n {
			out = append(out, map[string]any{"classname": "dnode", "keyname": fmt.Sprintf("s%d", i),
				"tag": "common", "n": 7, "addr": "10.0.0.1"})
		}
	case "forward_refs":
		half := n / 2
		for i := range n {
			m := map[string]any{"classname": "dnode", "keyname": fmt.Sprintf("f%d", i), "n": i}
			if i < half {
				m["peer"] = fmt.Sprintf("f%d", i+half)
			}
			out = append(out, m)
		}
	case "schema_first":
		const classes = 10
		for c := range classes {
			out = append(out, map[string]any{"classname": "_schema", "keyname": fmt.Sprintf("sc%d", c),
				"label": map[string]any{"dataformat": "string"}, "n": map[string]any{"dataformat": "int"},
				"up": map[string]any{"dataformat": "schema", "dataformat_ext": fmt.Sprintf("sc%d", c)}})
		}
		for i := range n - classes {
			m := map[string]any{"classname": fmt.Sprintf("sc%d", i%classes), "keyname": fmt.Sprintf("o%d", i),
				"label": "same", "n": i}
			if i >= classes {
				m["up"] = fmt.Sprintf("o%d", i-classes)
			}
			out = append(out, m)
		}
	default:
		panic("unknown shape " + shape)
	}
	return out
}

// dryShapeEntries parses the entries of dryShape (as a JSON load document).
func dryShapeEntries(tb testing.TB, shape string, n int) []*model.Entry {
	tb.Helper()
	doc, err := json.Marshal(dryShape(shape, n))
	if err != nil {
		tb.Fatal(err)
	}
	return parse(tb, string(doc))
}

// dryShapeDB is a database with the built-in definitions and the shapes' class.
func dryShapeDB(tb testing.TB) *store.DB {
	tb.Helper()
	db := newTestDB(tb)
	mustLoad(tb, db, dryShapeSchema, store.LoadOptions{})
	return db
}

// copyOf is a copy of db's file (on PostgreSQL, of its database), opened: the real
// load's side of a comparison. No statement of db may run meanwhile.
func copyOf(tb testing.TB, db *store.DB) *store.DB {
	tb.Helper()
	if testkit.Postgres() {
		store.CloseIdle(db)
		return testkit.Open(tb, testkit.CopyPostgres(tb, store.AddressOf(db)), testkit.Options{})
	}
	path := filepath.Join(tb.TempDir(), "copy.db")
	if err := db.Backup(context.Background(), path); err != nil {
		tb.Fatal(err)
	}
	return testkit.Open(tb, path, testkit.Options{})
}

// changeLog records the changes a load reports through OnChange, ids left out.
type changeLog struct{ lines []string }

func (c *changeLog) add(r store.Revision) {
	c.lines = append(c.lines, strings.Join([]string{r.Action, r.Classname, r.Keyname, r.Before, r.After, r.Author}, " | "))
}

func (c *changeLog) String() string { return strings.Join(c.lines, "\n") }

// randomDryLoad is a load of n entries drawn from rng over a database holding the
// objects of randomDryBase: creates, updates, deletes, enables and disables of new,
// stored, created and deleted objects; references to each of those and to objects
// created later; shared words; addresses (collected, also named directly as ipam_ip);
// invalid values; and schema changes in the middle (a field added, a field's type
// changed, a field deleted and added again, a class created and a class deleted).
func randomDryLoad(rng *rand.Rand, n int) string {
	var b strings.Builder
	key := func() string { return fmt.Sprintf("k%d", rng.IntN(n/3+5)) }
	for i := range n {
		switch r := rng.IntN(100); {
		case r < 2:
			switch rng.IntN(7) {
			case 0:
				fmt.Fprintf(&b, "- {classname: _schema, keyname: dnode, _action: update, extra%d: {dataformat: string}}\n", i)
			case 5:
				b.WriteString("- {classname: _schema, keyname: dnode, _action: update, n: {_action: delete}}\n")
			case 6:
				b.WriteString("- {classname: _schema, keyname: dnode, _action: update, n: {dataformat: int}}\n")
			case 1:
				b.WriteString("- {classname: _schema, keyname: dnode, _action: update, tag: {dataformat: int}}\n")
			case 2:
				b.WriteString("- {classname: _schema, keyname: dnode, _action: update, tag: {dataformat: string}}\n")
			case 3:
				b.WriteString("- {classname: _schema, keyname: other, label: {dataformat: string}}\n")
			default:
				b.WriteString("- {classname: _schema, keyname: other, _action: delete}\n")
			}
		case r < 5:
			fmt.Fprintf(&b, "- {classname: other, keyname: %s, label: x}\n", key())
		case r < 10:
			fmt.Fprintf(&b, "- {classname: dnode, keyname: %s, _action: delete}\n", key())
		case r < 14:
			fmt.Fprintf(&b, "- {classname: dnode, keyname: %s, _action: %s}\n", key(), []string{"enable", "disable"}[rng.IntN(2)])
		case r < 18:
			fmt.Fprintf(&b, "- {classname: ipam_ip, keyname: 10.9.0.%d, _action: update, is_enabled: %v}\n", rng.IntN(8), rng.IntN(2) == 0)
		case r < 22:
			fmt.Fprintf(&b, "- {classname: dnode, keyname: %s, n: not-a-number}\n", key())
		default:
			action := []string{"create", "create", "create", "update", "init"}[rng.IntN(5)]
			fmt.Fprintf(&b, "- {classname: dnode, keyname: %s, _action: %s, tag: %s, n: %d", key(), action,
				[]string{"common", "7", key(), "Common"}[rng.IntN(4)], rng.IntN(3))
			if rng.IntN(2) == 0 {
				fmt.Fprintf(&b, ", peer: %s", key())
			}
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&b, ", addr: 10.9.0.%d", rng.IntN(8))
			}
			b.WriteString("}\n")
		}
	}
	return b.String()
}

// randomDryBase is what the database holds before a randomized load: some of the
// keys the load names, references between them, collected addresses, and objects of
// a second class (so deleting that class is refused while they exist).
func randomDryBase(n int) string {
	var b strings.Builder
	b.WriteString("- {classname: _schema, keyname: other, label: {dataformat: string}}\n")
	for i := 0; i < 6; i += 3 {
		fmt.Fprintf(&b, "- {classname: other, keyname: k%d, label: stored}\n", i)
	}
	for i := 0; i < n/3+5; i += 2 {
		fmt.Fprintf(&b, "- {classname: dnode, keyname: k%d, tag: common, n: 1", i)
		if i > 0 {
			fmt.Fprintf(&b, ", peer: k%d", i-2)
		}
		if i%6 == 0 {
			fmt.Fprintf(&b, ", addr: 10.9.0.%d", i%8)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// dryTempOfItsOwn gives the test a TMPDIR of its own on PostgreSQL, where dry runs
// make their private directories in TMPDIR (DB.TempDir), so that no other test's dry
// run shows there; the test then does not run in parallel (t.Setenv). On SQLite the
// directories are beside the test's own file: the test runs in parallel.
func dryTempOfItsOwn(t *testing.T) {
	if testkit.Postgres() {
		t.Setenv("TMPDIR", t.TempDir())
		return
	}
	t.Parallel()
}

// dryDirsOf lists the dry runs' private directories of db: beside its file, or in
// TMPDIR for a database that is no file.
func dryDirsOf(tb testing.TB, db *store.DB) []string {
	tb.Helper()
	pattern := db.Path() + ".dryrun-*"
	if !db.IsFile() {
		pattern = filepath.Join(os.TempDir(), "dataservice-dryrun-*")
	}
	list, err := filepath.Glob(pattern)
	if err != nil {
		tb.Fatal(err)
	}
	return list
}
