package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// countByList counts r's addresses by listing them: what CountIPs must agree with.
func countByList(t *testing.T, db *store.DB, r store.IPRange) int {
	t.Helper()
	ips, err := db.IPsInRange(context.Background(), r, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return len(ips)
}

func checkCounts(t *testing.T, db *store.DB, ranges []store.IPRange) {
	t.Helper()
	for _, r := range ranges {
		n, err := db.CountIPs(context.Background(), r)
		if want := countByList(t, db, r); err != nil || n != want {
			t.Fatalf("CountIPs(%s): got %d %v, want %d", rangeText(r), n, err, want)
		}
	}
}

// CountIPs (block counts plus the index at the ends) agrees with listing the addresses,
// over random addresses clustered around /16 boundaries and random ranges, after
// creates, renames (a hexip displayname change moves the keyname), deletes, and a
// class change made by hand.
func TestCountIPsAgreesWithTheIndex(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	rng := rand.New(rand.NewPCG(testkit.Seed(t, "IPAM_SEED", 15), 0))
	addr := func() uint32 {
		block := []uint32{0x0a00, 0x0a01, 0x0a02, 0x0aff, 0x0b00, 0xc0a8, 0x0000, 0xffff}[rng.IntN(8)]
		low := []uint32{0, 1, 0xfffe, 0xffff, uint32(rng.IntN(1 << 16))}[rng.IntN(5)]
		return block<<16 | low
	}
	var doc string
	seen := map[uint32]bool{}
	for len(seen) < 300 {
		a := addr()
		if !seen[a] {
			seen[a] = true
			doc += fmt.Sprintf("- {classname: ipam_ip, displayname: %s}\n", store.IPv4String(a))
		}
	}
	mustLoad(t, db, doc, store.LoadOptions{})
	var ranges []store.IPRange
	for _, s := range []string{"0.0.0.0/0", "10.0.0.0/8", "10.0.0.0/15", "10.1.0.0/16", "10.1.255.0/24", "11.0.0.0/8", "255.255.0.0/16"} {
		ranges = append(ranges, mustSubnet(t, s))
	}
	for range 200 {
		a, b := addr(), addr()
		ranges = append(ranges, store.IPRange{First: min(a, b), Last: max(a, b)})
	}
	checkCounts(t, db, ranges)

	// Delete some by load; move some to another address and one to another class by
	// hand (as a rename or a migration would).
	var deletes string
	n := 0
	var order []uint32
	for a := range seen {
		order = append(order, a)
	}
	for _, a := range order {
		if n++; n > 90 {
			break
		}
		if n%2 == 0 {
			deletes += fmt.Sprintf("- {classname: ipam_ip, keyname: %08x, _action: delete}\n", a)
			continue // still in seen: no address moves onto it before the delete
		}
		b := addr()
		if seen[b] {
			continue
		}
		exec(t, db, "UPDATE instances SET keyname = ?, displayname = ? WHERE classname = 'ipam_ip' AND keyname = ?",
			fmt.Sprintf("%08x", b), store.IPv4String(b), fmt.Sprintf("%08x", a))
		seen[b] = true
	}
	if res := load(t, db, deletes, store.LoadOptions{}); res.Deleted < 40 || res.Errors != 0 {
		t.Fatalf("deletes: %s\n%s", counts(res), messages(res))
	}
	exec(t, db, "UPDATE instances SET classname = 'ipam_elsewhere' WHERE id = (SELECT max(id) FROM instances WHERE classname = 'ipam_ip')")
	checkCounts(t, db, ranges)
}

// A file made before the block counts gets them built from its addresses when it is
// opened.
func TestIPBlocksBuiltForExistingFiles(t *testing.T) {
	t.Parallel()
	testkit.SQLiteOnly(t, "a file of SQLite's layout 7, before the block counts; PostgreSQL's layout keeps them from its first step")
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	testkit.ExecFile(t, path, append([]string{
		`INSERT INTO instances(id, classname, keyname, created_at, updated_at) VALUES
			(1, 'ipam_ip', '0a000001', '', ''), (2, 'ipam_ip', '0a000002', '', ''), (3, 'ipam_ip', '0a010001', '', ''),
			(4, 'ipam_ip', '10.0.0.9', '', ''), (5, 'other', '0a000003', '', '')`},
		layoutsAfter(7)...)...,
	)
	db, err = store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for s, want := range map[string]int{"10.0.0.0/8": 3, "10.0.0.0/16": 2, "0.0.0.0/0": 3, "11.0.0.0/8": 0} {
		p, _ := store.ParseSubnet(s)
		if n, err := db.CountIPs(context.Background(), store.PrefixRange(p)); err != nil || n != want {
			t.Errorf("CountIPs(%s): got %d %v, want %d", s, n, err, want)
		}
	}
}
