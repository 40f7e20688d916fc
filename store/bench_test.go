package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

const benchInstances = 100_000

// benchSchema has the four kinds of field the load benchmark writes; bsite holds the
// 100 targets of the schema-reference field. bplain is the same without the ipv4 field
// (no IP collection: two rows an instance instead of four).
const benchSchema = `
- {classname: _schema, keyname: bsite, city: {dataformat: string}}
- classname: _schema
  keyname: bhost
  hostname: {dataformat: string}
  port: {dataformat: int, dataformat_ext: gte_1 lte_65535}
  ip: {dataformat: ipv4}
  site: {dataformat: schema, dataformat_ext: bsite}
- classname: _schema
  keyname: bplain
  hostname: {dataformat: string}
  port: {dataformat: int, dataformat_ext: gte_1 lte_65535}
  ip: {dataformat: string}
  site: {dataformat: schema, dataformat_ext: bsite}
`

func benchSites() string {
	var b strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "- {classname: bsite, keyname: site%02d, city: City %d}\n", i, i)
	}
	return b.String()
}

// benchRow is instance i of the benchmark: its keyname and field values.
func benchRow(i int) (key, hostname string, port int, ip, site string) {
	return fmt.Sprintf("h%06d", i), fmt.Sprintf("host-%06d.example.org", i), 1 + i%65535,
		fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), fmt.Sprintf("site%02d", i%100)
}

func benchDocument(class string) []byte {
	var b strings.Builder
	for i := 0; i < benchInstances; i++ {
		key, host, port, ip, site := benchRow(i)
		fmt.Fprintf(&b, "- {classname: %s, keyname: %s, hostname: %s, port: %d, ip: %s, site: %s}\n", class, key, host, port, ip, site)
	}
	return []byte(b.String())
}

// BenchmarkLoad100k parses and loads 100k new instances with string, int, ipv4 and
// schema-reference fields into a database holding the built-ins and the target sites:
// every instance writes its row and revision, and its address an ipam_ip row and
// revision (IP collection).
func BenchmarkLoad100k(b *testing.B) { benchLoad(b, "bhost") }

// BenchmarkLoad100kNoIPv4 is BenchmarkLoad100k without an ipv4 field: two rows an instance.
func BenchmarkLoad100kNoIPv4(b *testing.B) { benchLoad(b, "bplain") }

func benchLoad(b *testing.B, class string) {
	doc := benchDocument(class)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db := newTestDB(b)
		mustLoad(b, db, benchSchema+benchSites(), store.LoadOptions{})
		b.StartTimer()

		entries, err := codec.ParseDocument("bench.yml", doc)
		if err != nil {
			b.Fatal(err)
		}
		res, err := db.Load(ctx, entries, store.LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}

		b.StopTimer()
		if res.Created != benchInstances || res.Errors != 0 {
			b.Fatalf("load: %s %s", counts(res), messages(res))
		}
		if got, want := queryInt(b, db, "SELECT count(*) FROM instances WHERE classname = '"+class+"'"), benchInstances; got != want {
			b.Fatalf("%s rows: got %d, want %d", class, got, want)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(benchInstances*b.N)/b.Elapsed().Seconds(), "instances/s")
}

// BenchmarkFloorInsert100k is the physical floor of BenchmarkLoad100k: the same rows
// (instance, revision, ipam_ip, ipam_ip revision, with the same JSON payloads) inserted
// with plain database/sql and prepared statements in transactions of 1000, into the
// same table layout with the same pragmas, without any lookup or validation.
func BenchmarkFloorInsert100k(b *testing.B) { benchFloor(b, true) }

// BenchmarkFloorInsert100kNoIPv4 is the floor of BenchmarkLoad100kNoIPv4 (two rows).
func BenchmarkFloorInsert100kNoIPv4(b *testing.B) { benchFloor(b, false) }

func benchFloor(b *testing.B, withIP bool) {
	type row struct{ key, data, after, hex, ip, ipAfter string }
	rows := make([]row, benchInstances)
	for i := range rows {
		key, host, port, ip, site := benchRow(i)
		data := map[string]any{"hostname": host, "port": port, "ip": ip, "site": site}
		d, _ := json.Marshal(data)
		a, _ := json.Marshal(map[string]any{"keyname": key, "displayname": "", "is_enabled": true, "data": data})
		hex, _ := model.HexIP(ip)
		ipa, _ := json.Marshal(map[string]any{"keyname": hex, "displayname": ip, "is_enabled": true,
			"data": map[string]any{"collected": true}})
		rows[i] = row{key, string(d), string(a), hex, ip, string(ipa)}
	}
	b.ResetTimer() // building the rows is set-up, not the floor's work
	now := fixedNow.Format("2006-01-02T15:04:05Z")
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db := testkit.OpenFloorDB(b)
		b.StartTimer()

		for start := 0; start < len(rows); start += 1000 {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			ins, err := tx.PrepareContext(ctx, `INSERT INTO instances(classname, keyname, displayname, is_enabled, data,
				created_at, updated_at) VALUES(?, ?, ?, 1, ?, ?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			rev, err := tx.PrepareContext(ctx, `INSERT INTO revisions(classname, keyname, action, before, after, author,
				created_at) VALUES(?, ?, 'create', NULL, ?, 'system', ?)`)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rows[start:min(start+1000, len(rows))] {
				if _, err := ins.ExecContext(ctx, "bhost", r.key, "", r.data, now, now); err != nil {
					b.Fatal(err)
				}
				if _, err := rev.ExecContext(ctx, "bhost", r.key, r.after, now); err != nil {
					b.Fatal(err)
				}
				if !withIP {
					continue
				}
				if _, err := ins.ExecContext(ctx, "ipam_ip", r.hex, r.ip, `{"collected":true}`, now, now); err != nil {
					b.Fatal(err)
				}
				if _, err := rev.ExecContext(ctx, "ipam_ip", r.hex, r.ipAfter, now); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}

		b.StopTimer()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM instances WHERE classname = 'bhost'").Scan(&n); err != nil || n != benchInstances {
			b.Fatalf("bhost rows: got %d (%v), want %d", n, err, benchInstances)
		}
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchInstances*b.N)/b.Elapsed().Seconds(), "instances/s")
}
