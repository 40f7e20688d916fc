package bootstrap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// Contents of the IPAM dataviews: as 30_dataview.yml has them, and as older releases had them.
const (
	ipamIPViewContent        = "columns:\n  - keyname\n  - displayname\n  - collected\n  - hostname\n  - subnet\n"
	ipamIPViewContentOld     = "columns:\n  - keyname\n  - hostname\n  - subnet\n"
	ipamSubnetViewContent    = "columns:\n  - keyname\n  - displayname\n  - gateway\n  - site\n"
	ipamSubnetViewContentOld = "columns:\n  - keyname\n  - displayname\n  - subnet\n  - gateway\n  - site\n"
	ipamSubnetStrictMode     = "dataformat ipv4 subnet strict"
)

// Log messages of blocks 4.8.0 and 4.9.0.
const (
	msg480Done     = "4.8.0: ipam_ip keynames converted to hexip"
	msg480Twin     = "4.8.0: hex keyname already exists; dotted ipam_ip left as is"
	msg490Done     = "4.9.0: ipam_subnet instances renamed to their CIDR"
	msg490Invalid  = "4.9.0: subnet field is not a strict IPv4 CIDR; instance left as is"
	msg490Conflict = "4.9.0: rename reported errors; instance skipped"
)

// ipamSQL runs one statement with arguments through a store transaction.
var ipamSQL = testkit.Exec

// ipamRow inserts an instance row with SQL (no validation, no IP collection), stamped
// oldTime, and returns its id.
func ipamRow(t *testing.T, db *store.DB, cls, key, display string, data map[string]any) int64 {
	t.Helper()
	testkit.InsertInstances(t, db, cls, []testkit.Row{{Keyname: key, Displayname: display, Enabled: true, Data: data}})
	return int64(count(t, db, "SELECT id FROM instances WHERE classname = ? AND keyname = ?", cls, key))
}

// ipamLoadSchemas loads schema definitions as built-ins are loaded: all permissions, no revisions.
func ipamLoadSchemas(t *testing.T, db *store.DB, doc string) {
	t.Helper()
	testkit.MustLoad(t, db, doc, store.LoadOptions{System: true, NoRevisions: true})
}

// ipamRowState is one stored instance row as the tests compare it.
type ipamRowState struct {
	Classname, Keyname, Displayname, Data, UpdatedAt string
}

func (r ipamRowState) String() string {
	return fmt.Sprintf("%s %q %q %s", r.Classname, r.Keyname, r.Displayname, r.Data)
}

// ipamRowByID reads an instance row by id.
func ipamRowByID(t *testing.T, db *store.DB, id int64) ipamRowState {
	t.Helper()
	var r ipamRowState
	if err := db.Reader().QueryRowContext(context.Background(), "SELECT classname, keyname, displayname, data, updated_at FROM instances WHERE id = ?", id).
		Scan(&r.Classname, &r.Keyname, &r.Displayname, &r.Data, &r.UpdatedAt); err != nil {
		t.Fatalf("row %d: %v", id, err)
	}
	return r
}

// jsonText is the JSON text json.Marshal writes for v (keys sorted, as the store writes data).
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// oneLog returns the only record with that level and message.
func oneLog(t *testing.T, rec *testkit.Recorder, level slog.Level, msg string) testkit.Record {
	t.Helper()
	got := rec.Find(level, msg)
	if len(got) != 1 {
		t.Fatalf("log %q: %d records %+v, want 1", msg, len(got), got)
	}
	return got[0]
}

// checkAttrs compares some attributes of a log record.
func checkAttrs(t *testing.T, e testkit.Record, want map[string]string) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		if got := e.Attrs[k]; got != want[k] {
			t.Fatalf("log %q: %s = %q, want %q (attributes %v)", e.Msg, k, got, want[k], e.Attrs)
		}
	}
}

// schemaRow reads keyname_mode and the ordered field keynames of a schema from its tables.
func schemaRow(t *testing.T, db *store.DB, name string) (mode, fields string) {
	t.Helper()
	if err := db.Reader().QueryRowContext(context.Background(), "SELECT keyname_mode FROM schemas WHERE keyname = ?", name).Scan(&mode); err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	_, rows := testkit.Rows(t, db, "SELECT keyname FROM schema_fields WHERE classname = ? ORDER BY sort_order, id", name)
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r[0].(string)
	}
	return mode, strings.Join(keys, ",")
}

// ipamHostSchemas reference ipam_ip from single- and multi-valued fields of two
// schemas, next to ipv4 fields (which hold addresses, not references).
const ipamHostSchemas = `
- classname: _schema
  keyname: host
  ip: {dataformat: schema, dataformat_ext: ipam_ip}
  ips: {dataformat: schema, dataformat_ext: ipam_ip, cardinal_max: 0}
  mgmt: {dataformat: ipv4}
  note: {dataformat: string}
- classname: _schema
  keyname: link
  peer: {dataformat: schema, dataformat_ext: ipam_ip, cardinal_max: 0}
- classname: _schema
  keyname: device
  addr: {dataformat: ipv4}
  addrs: {dataformat: ipv4, cardinal_max: 0}
`

// ipamCase is one instance of a fixture: the row inserted and the row expected after Run.
type ipamCase struct {
	cls, key, display string
	data              map[string]any
	// wantKey, wantDisplay, wantData: the expected row after Run ("" / nil: as inserted).
	wantKey, wantDisplay string
	wantData             map[string]any
	// written: Run rewrites the row (updated_at changes); else it must not.
	written bool
	id      int64
}

func (c *ipamCase) insert(t *testing.T, db *store.DB) {
	t.Helper()
	c.id = ipamRow(t, db, c.cls, c.key, c.display, c.data)
}

// check compares the row after Run with what the case expects.
func (c *ipamCase) check(t *testing.T, db *store.DB) {
	t.Helper()
	want := ipamRowState{Classname: c.cls, Keyname: c.key, Displayname: c.display, Data: jsonText(t, c.data)}
	if c.wantKey != "" {
		want.Keyname = c.wantKey
	}
	if c.wantDisplay != "" {
		want.Displayname = c.wantDisplay
	}
	if c.wantData != nil {
		want.Data = jsonText(t, c.wantData)
	} else if _, ok := c.data["subnet"]; ok && c.cls == "ipam_subnet" {
		// Block 4.9.0 deletes the field definition ipam_subnet.subnet, and with it
		// every stored value of that field.
		rest := map[string]any{}
		for k, v := range c.data {
			if k != "subnet" {
				rest[k] = v
			}
		}
		want.Data = jsonText(t, rest)
	}
	got := ipamRowByID(t, db, c.id)
	if got.String() != want.String() {
		t.Fatalf("row %d (%s %s) after Run:\n got  %s\n want %s", c.id, c.cls, c.key, got, want)
	}
	if written := got.UpdatedAt != oldTime; written != c.written {
		t.Fatalf("row %d (%s %s): rewritten = %v (updated_at %s), want %v", c.id, c.cls, c.key, written, got.UpdatedAt, c.written)
	}
}

// ipamCases47 is a database in the 4.7 shape: dotted, hex, twin and non-address ipam_ip
// keynames, and references to them.
func ipamCases47() []*ipamCase {
	type m = map[string]any
	type l = []any
	return []*ipamCase{
		{cls: "ipam_subnet", key: "10.0.0.0/24", data: m{"site": "hq"}},
		// Dotted keynames: converted to hex, displayname = the address, data kept.
		{cls: "ipam_ip", key: "10.0.0.1", data: m{"hostname": "h1", "subnet": "10.0.0.0/24"},
			wantKey: "0a000001", wantDisplay: "10.0.0.1", written: true},
		{cls: "ipam_ip", key: "10.0.0.2", display: "old label", data: m{"hostname": "h2", "description": "second"},
			wantKey: "0a000002", wantDisplay: "10.0.0.2", written: true},
		{cls: "ipam_ip", key: "192.168.1.10", display: "192.168.1.10", data: m{"description": "printer"},
			wantKey: "c0a8010a", written: true},
		{cls: "ipam_ip", key: "10.0.0.7", data: m{}, wantKey: "0a000007", wantDisplay: "10.0.0.7", written: true},
		// Already hex: untouched.
		{cls: "ipam_ip", key: "0a000005", display: "10.0.0.5", data: m{"hostname": "h5"}},
		{cls: "ipam_ip", key: "0a000009", display: "10.0.0.9", data: m{}},
		// Dotted, but its hex twin exists: skipped with a warning.
		{cls: "ipam_ip", key: "10.0.0.5", display: "10.0.0.5", data: m{"hostname": "twin"}},
		// Not addresses: untouched.
		{cls: "ipam_ip", key: "gateway-1", display: "Gateway", data: m{"hostname": "gw"}},
		{cls: "ipam_ip", key: "10.0.0.300", data: m{}},
		{cls: "ipam_ip", key: "010.0.0.1", data: m{}},
		// References: single and multi-valued, in two schemas; ipv4 and string values stay.
		{cls: "host", key: "h1", data: m{"ip": "10.0.0.1", "ips": l{"10.0.0.2", "192.168.1.10", "0a000005", "gateway-1"},
			"mgmt": "10.0.0.1", "note": "10.0.0.7"},
			wantData: m{"ip": "0a000001", "ips": l{"0a000002", "c0a8010a", "0a000005", "gateway-1"}, "mgmt": "10.0.0.1",
				"note": "10.0.0.7"}, written: true},
		{cls: "host", key: "h2", data: m{"ip": "10.0.0.5", "ips": l{"10.0.0.5", "10.0.0.7"}, "mgmt": "10.0.0.77"},
			wantData: m{"ip": "10.0.0.5", "ips": l{"10.0.0.5", "0a000007"}, "mgmt": "10.0.0.77"}, written: true},
		{cls: "host", key: "h3", data: m{"ip": "gateway-1", "ips": l{"010.0.0.1"}, "mgmt": "10.0.0.78"}},
		{cls: "host", key: "h4", data: m{"ip": "10.0.0.99"}},
		{cls: "link", key: "l1", data: m{"peer": l{"10.0.0.1", "10.0.0.2"}},
			wantData: m{"peer": l{"0a000001", "0a000002"}}, written: true},
		{cls: "link", key: "l2", data: m{"peer": l{"10.0.0.300"}}},
		{cls: "device", key: "d1", data: m{"addr": "10.0.0.1", "addrs": l{"10.0.0.2", "10.0.0.60"}}},
	}
}

// shape47 turns a migrated database back into the 4.7 shape of ipam_ip.
func shape47(t *testing.T, db *store.DB) {
	t.Helper()
	execSQL(t, db,
		"UPDATE schemas SET keyname_mode = 'edit' WHERE keyname = 'ipam_ip'",
		"DELETE FROM schema_fields WHERE classname = 'ipam_ip' AND keyname = 'collected'")
	setData(t, db, "_dataview", "ipam_ip_default", map[string]any{"content": ipamIPViewContentOld})
	setData(t, db, "_home", "ipam", map[string]any{"url": "/ipam/"})
}

// shape48 turns a migrated database back into the 4.8 shape of ipam_subnet.
func shape48(t *testing.T, db *store.DB) {
	t.Helper()
	execSQL(t, db,
		"UPDATE schemas SET keyname_mode = 'edit' WHERE keyname = 'ipam_subnet'",
		`INSERT INTO schema_fields(classname, keyname, displayname, dataformat, dataformat_ext, sort_order)
			VALUES('ipam_subnet', 'subnet', 'Subnet', 'ipv4', 'subnet', 5)`)
	setData(t, db, "_dataview", "ipam_subnet", map[string]any{"content": ipamSubnetViewContentOld})
}

// checkIPAMBuiltins checks what blocks 4.8.0 and 4.9.0 reload and delete.
func checkIPAMBuiltins(t *testing.T, db *store.DB) {
	t.Helper()
	if mode, fields := schemaRow(t, db, "ipam_ip"); mode+" "+fields != "hexip description,hostname,subnet,collected" {
		t.Fatalf("ipam_ip: mode %q fields %s, want hexip with description,hostname,subnet,collected", mode, fields)
	}
	var format, def string
	if err := db.Reader().QueryRowContext(context.Background(), "SELECT dataformat, default_value FROM schema_fields WHERE classname = 'ipam_ip' AND keyname = 'collected'").
		Scan(&format, &def); err != nil {
		t.Fatal(err)
	}
	if got, want := format+" "+def, "boolean false"; got != want {
		t.Fatalf("ipam_ip collected: %s, want %s", got, want)
	}
	if mode, fields := schemaRow(t, db, "ipam_subnet"); mode+" "+fields != ipamSubnetStrictMode+" description,gateway,site" {
		t.Fatalf("ipam_subnet: mode %q fields %s, want %s with description,gateway,site", mode, fields, ipamSubnetStrictMode)
	}
	s, err := db.Schema(context.Background(), "ipam_subnet")
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Field("subnet"); f != nil {
		t.Fatalf("cached ipam_subnet schema still has field subnet: %+v", f)
	}
	for key, want := range map[string]string{"ipam_ip_default": ipamIPViewContent, "ipam_subnet": ipamSubnetViewContent} {
		if got := field(mustInstance(t, db, "_dataview", key), "content"); got != want {
			t.Fatalf("dataview %s content = %q, want %q", key, got, want)
		}
	}
	if got, want := field(mustInstance(t, db, "_home", "ipam"), "url"), "/data/private/ipam/"; got != want {
		t.Fatalf("_home ipam url = %q, want %q", got, want)
	}
}

func TestMigrate480(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	ipamLoadSchemas(t, db, ipamHostSchemas)
	shape47(t, db)
	cases := ipamCases47()
	for _, c := range cases {
		c.insert(t, db)
	}
	setRegistry(t, db, store.RegDBVersion, "4.7.0")
	ipsBefore := count(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'")
	o := options(t, rec)
	run(t, db, o)

	t.Run("blocks 4.8.0 and 4.9.0 run and DB_VERSION is the code version", func(t *testing.T) {
		if got, want := strings.Join(blocksStarted(rec), ","), "4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
	t.Run("every instance has its expected keyname, displayname and data", func(t *testing.T) {
		for _, c := range cases {
			c.check(t, db)
		}
	})
	t.Run("no ipam_ip row remains under a converted dotted keyname", func(t *testing.T) {
		if got, want := count(t, db, `SELECT count(*) FROM instances WHERE classname = 'ipam_ip'
			AND keyname IN ('10.0.0.1', '10.0.0.2', '192.168.1.10', '10.0.0.7')`), 0; got != want {
			t.Fatalf("rows under converted keynames = %d, want %d", got, want)
		}
		if got, want := count(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), ipsBefore; got != want {
			t.Fatalf("ipam_ip rows = %d, want %d (none added, none removed)", got, want)
		}
	})
	t.Run("the twin is skipped with one warning and the counts are logged", func(t *testing.T) {
		checkAttrs(t, oneLog(t, rec, slog.LevelWarn, msg480Twin), map[string]string{"keyname": "10.0.0.5", "hex": "0a000005"})
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg480Done),
			map[string]string{"converted": "4", "skipped": "1", "references_updated": "6"})
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 1 {
			t.Fatalf("warnings and errors = %+v, want only the twin's", got)
		}
	})
	t.Run("ipam_ip is hexip with collected and the dataview and dashboard entry are reloaded", func(t *testing.T) {
		checkIPAMBuiltins(t, db)
	})
	t.Run("no revision is written", func(t *testing.T) {
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
	t.Run("a second start changes nothing", func(t *testing.T) {
		before := snapshot(t, db)
		rec.Reset()
		run(t, db, o)
		if after := snapshot(t, db); after != before {
			t.Fatalf("second start changed the data: %s", diffLines(before, after))
		}
		if got := blocksStarted(rec); len(got) != 0 {
			t.Fatalf("blocks = %v, want none", got)
		}
	})
	t.Run("running the blocks again from 4.7.0 changes nothing", func(t *testing.T) {
		rec.Reset()
		assertRerunChangesNothing(t, db, o, "4.7.0")
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg480Done),
			map[string]string{"converted": "0", "skipped": "1", "references_updated": "0"})
	})
	t.Run("a 4.8.0 release candidate re-runs the block and changes nothing", func(t *testing.T) {
		rc := o
		rc.Version = "4.8.0-RC1"
		before := snapshot(t, db)
		rec.Reset()
		run(t, db, rc)
		if got, want := strings.Join(blocksStarted(rec), ","), "4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg480Done),
			map[string]string{"converted": "0", "skipped": "1", "references_updated": "0"})
		if after := snapshot(t, db); after != before {
			t.Fatalf("release-candidate start changed the data: %s", diffLines(before, after))
		}
		if got, want := dbVersion(t, db), "4.8.0-RC1"; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
}

// ipamCases48 is a database in the 4.8 shape: ipam_subnet keynames are free text and
// the CIDR is in the `subnet` field; ipam_vlan and ipam_ip reference the subnets.
func ipamCases48() []*ipamCase {
	type m = map[string]any
	type l = []any
	return []*ipamCase{
		// A valid aligned CIDR: renamed.
		{cls: "ipam_subnet", key: "office-lan", display: "Office LAN", data: m{"subnet": "10.10.0.0/16", "site": "hq"},
			wantKey: "10.10.0.0/16", written: true},
		// A chain: core-a wants B's keyname; B is renamed to 10.41.0.0/16 first, core-a in a later pass.
		{cls: "ipam_subnet", key: "core-a", display: "Core A", data: m{"subnet": "10.40.0.0/16"},
			wantKey: "10.40.0.0/16", written: true},
		{cls: "ipam_subnet", key: "10.40.0.0/16", display: "Core B", data: m{"subnet": "10.41.0.0/16", "gateway": "10.40.0.1"},
			wantKey: "10.41.0.0/16", written: true},
		// Invalid subnet values: warned about and left.
		{cls: "ipam_subnet", key: "lab-net", data: m{"subnet": "10.1.0.1/16"}},
		{cls: "ipam_subnet", key: "junk-net", data: m{"subnet": "not a subnet"}},
		{cls: "ipam_subnet", key: "zero-net", data: m{"subnet": "10.01.0.0/16"}},
		// Equal to the keyname, or absent: nothing to do, no warning.
		{cls: "ipam_subnet", key: "10.20.0.0/16", data: m{"subnet": "10.20.0.0/16"}},
		{cls: "ipam_subnet", key: "no-subnet", data: m{"site": "branch"}},
		// The CIDR is taken by an instance that is not renamed: the rename is skipped.
		{cls: "ipam_subnet", key: "10.30.0.0/24", data: m{}},
		{cls: "ipam_subnet", key: "dup-net", data: m{"subnet": "10.30.0.0/24"}},
		// References.
		{cls: "ipam_vlan", key: "v1", data: m{"vlan_id": 1, "subnet": l{"office-lan", "core-a", "10.40.0.0/16", "lab-net"}},
			wantData: m{"vlan_id": 1, "subnet": l{"10.10.0.0/16", "10.40.0.0/16", "10.41.0.0/16", "lab-net"}}, written: true},
		{cls: "ipam_vlan", key: "v2", data: m{"vlan_id": 2, "subnet": l{"dup-net", "10.30.0.0/24", "10.20.0.0/16", "no-subnet"}}},
		{cls: "ipam_vlan", key: "v3", data: m{"vlan_id": 3, "subnet": l{"junk-net"}}},
		{cls: "ipam_ip", key: "0a0a0001", display: "10.10.0.1", data: m{"subnet": "office-lan"},
			wantData: m{"subnet": "10.10.0.0/16"}, written: true},
		{cls: "ipam_ip", key: "0a280001", display: "10.40.0.1", data: m{"subnet": "10.40.0.0/16"},
			wantData: m{"subnet": "10.41.0.0/16"}, written: true},
		{cls: "ipam_ip", key: "0a280002", display: "10.40.0.2", data: m{"subnet": "core-a", "hostname": "core"},
			wantData: m{"subnet": "10.40.0.0/16", "hostname": "core"}, written: true},
		{cls: "ipam_ip", key: "0a010001", display: "10.1.0.1", data: m{"subnet": "lab-net"}},
	}
}

func TestMigrate490(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	shape48(t, db)
	cases := ipamCases48()
	for _, c := range cases {
		c.insert(t, db)
	}
	setRegistry(t, db, store.RegDBVersion, "4.8.0")
	o := options(t, rec)
	run(t, db, o)

	t.Run("only block 4.9.0 runs", func(t *testing.T) {
		if got, want := strings.Join(blocksStarted(rec), ","), "4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
	t.Run("subnets are renamed to their CIDR and every reference follows", func(t *testing.T) {
		for _, c := range cases {
			c.check(t, db)
		}
	})
	t.Run("the log counts renamed and skipped instances", func(t *testing.T) {
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg490Done),
			map[string]string{"renamed": "3", "skipped": "4", "references_updated": "6"})
	})
	t.Run("each invalid or conflicting subnet is warned about", func(t *testing.T) {
		var invalid []string
		for _, e := range rec.Find(slog.LevelWarn, msg490Invalid) {
			invalid = append(invalid, e.Attrs["keyname"]+"="+e.Attrs["subnet"])
		}
		if got, want := strings.Join(invalid, ","), "lab-net=10.1.0.1/16,junk-net=not a subnet,zero-net=10.01.0.0/16"; got != want {
			t.Fatalf("invalid-subnet warnings = %s, want %s", got, want)
		}
		conflict := oneLog(t, rec, slog.LevelWarn, msg490Conflict)
		if got, want := conflict.Attrs["error"], "dup-net -> 10.30.0.0/24: ipam_subnet 10.30.0.0/24 already exists"; got != want {
			t.Fatalf("conflict warning = %q, want %q", got, want)
		}
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 4 {
			t.Fatalf("warnings and errors = %+v, want the 4 above", got)
		}
	})
	t.Run("the subnet field is deleted and the dataview reloaded", func(t *testing.T) {
		checkIPAMBuiltins(t, db)
		if got, want := count(t, db, "SELECT count(*) FROM schema_fields WHERE classname = 'ipam_subnet' AND keyname = 'subnet'"), 0; got != want {
			t.Fatalf("subnet field definitions = %d, want %d", got, want)
		}
	})
	t.Run("no revision is written", func(t *testing.T) {
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
	// The first run deleted the subnet field and its values: a re-run has nothing to
	// read back, so it neither renames nor skips (nor warns).
	t.Run("running the block again from 4.8.0 changes nothing", func(t *testing.T) {
		rec.Reset()
		assertRerunChangesNothing(t, db, o, "4.8.0")
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg490Done),
			map[string]string{"renamed": "0", "skipped": "0", "references_updated": "0"})
	})
	t.Run("a 4.9.0 release candidate re-runs the block and changes nothing", func(t *testing.T) {
		rc := o
		rc.Version = "4.9.0-RC2"
		before := snapshot(t, db)
		rec.Reset()
		run(t, db, rc)
		if got, want := strings.Join(blocksStarted(rec), ","), "4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg490Done),
			map[string]string{"renamed": "0", "skipped": "0", "references_updated": "0"})
		if after := snapshot(t, db); after != before {
			t.Fatalf("release-candidate start changed the data: %s", diffLines(before, after))
		}
		if got, want := dbVersion(t, db), "4.9.0-RC2"; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
}

func TestMigrateChainFrom410(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	// The 4.1 shape: what 4.2.0 deletes is present, what 4.2.0-4.6.0 add is absent,
	// ipam_ip is keyed by dotted addresses and ipam_subnet by free text.
	for _, p := range removedIn420 {
		insertPermission(t, db, p)
	}
	execSQL(t, db,
		`DELETE FROM permissions WHERE keyname IN ('p_keyname_rename', 'p_api_load', 'p_api_rawfile', 'p_api_conf', 'p_code_editor')`,
		`DELETE FROM instances WHERE classname = '_home' AND keyname IN ('code_editor', 'revision')`,
		`DELETE FROM instances WHERE classname = '_dataview' AND keyname = 'user_default'`,
		`DELETE FROM instances WHERE classname = '_pipeline' AND keyname = 'bulk_delete_disabled'`,
		`DELETE FROM instances WHERE classname = '_apikey' AND keyname = 'api_builtin'`)
	shape47(t, db)
	shape48(t, db)
	type m = map[string]any
	type l = []any
	cases := []*ipamCase{
		{cls: "_pipeline", key: "p_old", data: m{"content": wrapContent}, wantData: m{"content": wrapFlattened}, written: true},
		{cls: "ipam_subnet", key: "office-lan", data: m{"subnet": "10.10.0.0/16"}, wantKey: "10.10.0.0/16", written: true},
		{cls: "ipam_subnet", key: "lab-net", data: m{"subnet": "10.1.0.1/16"}},
		{cls: "ipam_ip", key: "10.10.0.5", data: m{"subnet": "office-lan", "hostname": "web"},
			wantKey: "0a0a0005", wantDisplay: "10.10.0.5", wantData: m{"subnet": "10.10.0.0/16", "hostname": "web"}, written: true},
		{cls: "ipam_ip", key: "10.1.0.6", data: m{"subnet": "lab-net"}, wantKey: "0a010006", wantDisplay: "10.1.0.6", written: true},
		{cls: "ipam_ip", key: "gateway-1", data: m{"subnet": "office-lan"}, wantData: m{"subnet": "10.10.0.0/16"}, written: true},
		{cls: "ipam_vlan", key: "v1", data: m{"vlan_id": 7, "subnet": l{"office-lan", "lab-net"}},
			wantData: m{"vlan_id": 7, "subnet": l{"10.10.0.0/16", "lab-net"}}, written: true},
	}
	for _, c := range cases {
		c.insert(t, db)
	}
	setRegistry(t, db, store.RegDBVersion, "4.1.0")
	o := options(t, rec)
	run(t, db, o)

	t.Run("every block runs once, in order", func(t *testing.T) {
		var seq []string
		for _, e := range rec.All() {
			switch e.Msg {
			case "migration block start":
				seq = append(seq, "start "+e.Attrs["block"])
			case "migration block done":
				seq = append(seq, "done "+e.Attrs["block"])
			}
		}
		want := "start 4.2.0,done 4.2.0,start 4.4.0,done 4.4.0,start 4.5.0,done 4.5.0,start 4.6.0,done 4.6.0," +
			"start 4.8.0,done 4.8.0,start 4.9.0,done 4.9.0"
		if got := strings.Join(seq, ","); got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
	t.Run("permissions and built-ins of blocks 4.2.0 to 4.6.0 are in place", func(t *testing.T) {
		for _, p := range removedIn420 {
			if _, ok := permission(t, db, p); ok {
				t.Fatalf("permission %s still exists", p)
			}
		}
		for _, p := range []string{"p_keyname_rename", "p_api_load", "p_api_rawfile", "p_api_conf", "p_code_editor"} {
			mustPermission(t, db, p)
		}
		if got, want := field(mustInstance(t, db, "_home", "code_editor"), "url"), "/data/private/code_editor/"; got != want {
			t.Fatalf("code_editor url = %q, want %q", got, want)
		}
		for _, k := range [][2]string{{"_home", "revision"}, {"_dataview", "user_default"}, {"_pipeline", "bulk_delete_disabled"}, {"_apikey", "api_builtin"}} {
			mustInstance(t, db, k[0], k[1])
		}
	})
	t.Run("ipam instances and references end in their 4.9 form", func(t *testing.T) {
		for _, c := range cases {
			c.check(t, db)
		}
		checkIPAMBuiltins(t, db)
	})
	t.Run("the ipam blocks log their counts and the one invalid subnet", func(t *testing.T) {
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg480Done),
			map[string]string{"converted": "2", "skipped": "0", "references_updated": "0"})
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg490Done),
			map[string]string{"renamed": "1", "skipped": "1", "references_updated": "3"})
		checkAttrs(t, oneLog(t, rec, slog.LevelWarn, msg490Invalid), map[string]string{"keyname": "lab-net"})
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 1 {
			t.Fatalf("warnings and errors = %+v, want only lab-net's", got)
		}
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
	t.Run("running every block again from 4.1.0 changes nothing", func(t *testing.T) {
		assertRerunChangesNothing(t, db, o, "4.1.0")
	})
}
