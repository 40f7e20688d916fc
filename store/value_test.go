package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// formatsSchema has one field per dataformat (string, text, int, float, boolean, date,
// datetime, ipv4, schema, user, group, enumerate, external), and a few variants.
const formatsSchema = `
- classname: _schema
  keyname: site
  city: {dataformat: string}
- {classname: site, keyname: paris, city: Paris}
- classname: _enumerate
  keyname: colors
  content: |
    - {value: red, label: Red}
    - {value: green}
- {classname: _user, keyname: jdoe}
- classname: _schema
  keyname: t
  s: {dataformat: string}
  tx: {dataformat: text}
  ty: {dataformat: text, dataformat_ext: yaml}
  tj: {dataformat: text, dataformat_ext: json}
  i: {dataformat: int}
  ib: {dataformat: int, dataformat_ext: gt_0 lt_10}
  ie: {dataformat: int, dataformat_ext: gte_1 lte_4094}
  f: {dataformat: float}
  fb: {dataformat: float, dataformat_ext: gt_0.5 lte_2.5}
  b: {dataformat: boolean}
  d: {dataformat: date}
  dt: {dataformat: datetime}
  ip: {dataformat: ipv4}
  net: {dataformat: ipv4, dataformat_ext: subnet}
  strict: {dataformat: ipv4, dataformat_ext: subnet strict}
  ref: {dataformat: schema, dataformat_ext: site}
  u: {dataformat: user}
  g: {dataformat: group}
  color: {dataformat: enumerate, dataformat_ext: colors}
  city: {dataformat: external, dataformat_ext: ref city}
  multi: {dataformat: string, cardinal_max: 0}
  multi2: {dataformat: int, cardinal_max: 2}
  nets: {dataformat: ipv4, dataformat_ext: subnet, cardinal_max: 0}
  sec: {dataformat: secret}
`

func TestDataformats(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, formatsSchema, store.LoadOptions{})
	// value is a YAML flow value; want is the stored JSON of the field in the data
	// column, "-" for no stored value, or "error" for a refused value.
	tests := []struct {
		field, value, want string
	}{
		{"s", "hello", `"hello"`},
		{"s", "42", `"42"`},
		{"s", "true", `"true"`},
		{"s", `""`, "-"},
		{"s", "null", "-"},
		{"s", "[only]", `"only"`},
		{"s", "[a, b]", "error"},
		{"s", "{a: 1}", "error"},
		{"tx", `"any: [text"`, `"any: [text"`},
		{"ty", `"a: 1"`, `"a: 1"`},
		{"ty", `"- x\n- y"`, `"- x\n- y"`},
		{"ty", `"a: [1"`, "error"},
		{"tj", `'{"a": 1}'`, `"{\"a\": 1}"`},
		{"tj", `"[1, 2]"`, `"[1, 2]"`},
		{"tj", `"{a: 1}"`, "error"},
		{"i", "42", "42"},
		{"i", `"42"`, "42"},
		{"i", `" -7 "`, "-7"},
		{"i", "4.0", "4"},
		{"i", "4.5", "error"},
		{"i", "abc", "error"},
		{"ib", "1", "1"},
		{"ib", "9", "9"},
		{"ib", "0", "error"},
		{"ib", "10", "error"},
		{"ie", "1", "1"},
		{"ie", "4094", "4094"},
		{"ie", "0", "error"},
		{"ie", "4095", "error"},
		{"f", "2.5", "2.5"},
		{"f", `"-1e3"`, "-1000"},
		{"f", "7", "7"},
		{"f", "NaN", "error"},
		{"f", ".nan", "error"},
		{"f", ".inf", "error"},
		{"f", "abc", "error"},
		{"fb", "0.51", "0.51"},
		{"fb", "2.5", "2.5"},
		{"fb", "0.5", "error"},
		{"fb", "2.6", "error"},
		{"b", "true", "true"},
		{"b", `"yes"`, "true"},
		{"b", "On", "true"},
		{"b", "TRUE", "true"},
		{"b", "1", "true"},
		{"b", "false", "false"},
		{"b", "no", "false"},
		{"b", "OFF", "false"},
		{"b", "0", "false"},
		{"b", `""`, "false"},
		{"b", "null", "-"},
		{"b", "maybe", "error"},
		{"b", "2", "error"},
		{"d", "2026-01-31", `"2026-01-31"`},
		{"d", "2024-02-29", `"2024-02-29"`},
		{"d", "2026-02-30", "error"},
		{"d", "2026/01/31", "error"},
		{"d", "2026-1-31", "error"},
		{"d", `"2026-01-31T10:00:00"`, "error"},
		{"dt", `"2026-01-31T12:30:00"`, `"2026-01-31T12:30:00"`},
		{"dt", `"2026-01-31 12:30:00"`, `"2026-01-31T12:30:00"`},
		{"dt", "2026-01-31", "error"},
		{"dt", `"2026-01-31T25:00:00"`, "error"},
		{"dt", `"2026-01-31 12:30"`, "error"},
		{"ip", "10.0.0.1", `"10.0.0.1"`},
		{"ip", `" 192.168.1.10 "`, `"192.168.1.10"`},
		{"ip", "0.0.0.0", `"0.0.0.0"`},
		{"ip", "255.255.255.255", `"255.255.255.255"`},
		{"ip", "10.0.0.256", "error"},
		{"ip", "010.0.0.1", "error"},
		{"ip", "10.0.0", "error"},
		{"ip", "10.0.0.0/8", "error"},
		{"ip", `"::1"`, "error"},
		{"ip", "host.example", "error"},
		{"net", "10.0.0.0/8", `"10.0.0.0/8"`},
		{"net", "10.1.2.3/24", `"10.1.2.3/24"`},
		{"net", "10.0.0.1", "error"},
		{"net", "10.0.0.0/33", "error"},
		{"net", "10.01.0.0/16", "error"},
		{"strict", "10.1.0.0/16", `"10.1.0.0/16"`},
		{"strict", "0.0.0.0/0", `"0.0.0.0/0"`},
		{"strict", "10.1.0.1/16", "error"},
		{"strict", "10.01.0.0/16", "error"},
		{"strict", "10.1.0.0/33", "error"},
		{"strict", "10.1.0.0", "error"},
		{"ref", "paris", `"paris"`},
		{"ref", `"bad key"`, "error"},
		{"ref", "london", "error"},
		{"u", "jdoe", `"jdoe"`},
		{"u", "someone.else@example.org", `"someone.else@example.org"`},
		{"u", `"j doe"`, "error"},
		{"u", `"a\tb"`, "error"},
		{"g", "admins", `"admins"`},
		{"g", `"two words"`, "error"},
		{"color", "red", `"red"`},
		{"color", "green", `"green"`},
		{"color", "blue", "error"},
		{"color", "Red", "error"},
		{"city", "Anywhere", "-"},
		{"multi", `"a, b,,c "`, `["a","b","c"]`},
		{"multi", "[x, y]", `["x","y"]`},
		{"multi", "single", `["single"]`},
		{"multi", "5", `["5"]`},
		{"multi", `""`, "-"},
		{"multi", `" , "`, "-"},
		{"multi", "[]", "-"},
		{"multi", "[[nested]]", "error"},
		{"multi2", `"1, 2"`, "[1,2]"},
		{"multi2", "[3]", "[3]"},
		{"multi2", `"1,2,3"`, "error"},
		{"multi2", "[1, x]", "error"},
		{"nets", `"10.0.0.0/8, 192.168.0.0/16"`, `["10.0.0.0/8","192.168.0.0/16"]`},
		{"nets", `"10.0.0.0/8, 10.0.0.1"`, "error"},
	}
	for i, tt := range tests {
		outcome := "stores " + tt.want
		switch tt.want {
		case "error":
			outcome = "is refused"
		case "-":
			outcome = "stores nothing"
		}
		t.Run(fmt.Sprintf("%s %s %s", tt.field, tt.value, outcome), func(t *testing.T) {
			key := fmt.Sprintf("k%d", i)
			res := load(t, db, fmt.Sprintf("{classname: t, keyname: %s, %s: %s}", key, tt.field, tt.value), store.LoadOptions{})
			if tt.want == "error" {
				if got, want := res.Errors, 1; got != want {
					t.Fatalf("errors: got %d, want %d", got, want)
				}
				if msg := res.Messages[0].Message; !strings.Contains(msg, "field "+tt.field) {
					t.Fatalf("message %q does not name the field %s", msg, tt.field)
				}
				absent(t, db, "t", key)
				return
			}
			if got, want := res.Errors, 0; got != want {
				t.Fatalf("errors: got %d, want %d (%s)", got, want, messages(res))
			}
			got := queryString(t, db, `SELECT data -> ? FROM instances WHERE classname = 't' AND keyname = ?`,
				tt.field, key)
			if got == "<null>" {
				got = "-"
			}
			if got != tt.want {
				t.Fatalf("stored %s: got %s, want %s", tt.field, got, tt.want)
			}
		})
	}
}

func TestExternalIsComputed(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, formatsSchema+`
- {classname: t, keyname: e1, ref: paris, city: Ignored}
- {classname: t, keyname: e2}
`, store.LoadOptions{})
	ctx := context.Background()
	s, err := db.Schema(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	e1 := instance(t, db, "t", "e1")
	if v, ok := e1.Data["city"]; ok {
		t.Fatalf("external city stored: %s", fmtValue(v))
	}
	doc := db.InstanceDoc(ctx, s, e1)
	if got, want := fmtValue(doc.Vals["city"]), "string(Paris)"; got != want {
		t.Fatalf("computed city: got %s, want %s", got, want)
	}
	t.Run("follows a change of the referenced instance", func(t *testing.T) {
		mustLoad(t, db, `{classname: site, keyname: paris, city: Paname}`, store.LoadOptions{})
		if got, want := fmtValue(db.InstanceDoc(ctx, s, e1).Vals["city"]), "string(Paname)"; got != want {
			t.Fatalf("computed city: got %s, want %s", got, want)
		}
	})
	t.Run("is absent without a reference", func(t *testing.T) {
		if v, ok := db.InstanceDoc(ctx, s, instance(t, db, "t", "e2")).Vals["city"]; ok {
			t.Fatalf("computed city: got %s, want none", fmtValue(v))
		}
	})
}

func TestSecretField(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, formatsSchema, store.LoadOptions{})
	ctx := context.Background()
	mustLoad(t, db, `{classname: t, keyname: s1, sec: hunter2, s: visible}`, store.LoadOptions{})
	stored, _ := instance(t, db, "t", "s1").Data["sec"].(string)
	t.Run("plain text is stored as an argon2id hash", func(t *testing.T) {
		if !strings.HasPrefix(stored, "$argon2id$") {
			t.Fatalf("stored secret %q is not an argon2id hash", stored)
		}
		if got, want := model.VerifySecret("hunter2", stored), true; got != want {
			t.Fatalf("verify: got %v, want %v", got, want)
		}
	})
	t.Run("never appears in InstanceDoc", func(t *testing.T) {
		s, err := db.Schema(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		doc := db.InstanceDoc(ctx, s, instance(t, db, "t", "s1"))
		if v, ok := doc.Vals["sec"]; ok {
			t.Fatalf("InstanceDoc holds the secret: %s", fmtValue(v))
		}
		if got, want := fmtValue(doc.Vals["s"]), "string(visible)"; got != want {
			t.Fatalf("InstanceDoc s: got %s, want %s", got, want)
		}
	})
	t.Run("never appears in revisions", func(t *testing.T) {
		n := queryInt(t, db, "SELECT count(*) FROM revisions WHERE keyname = 's1'")
		if got, want := n, 1; got != want {
			t.Fatalf("revisions of s1: got %d, want %d", got, want)
		}
		after := queryString(t, db, "SELECT after FROM revisions WHERE keyname = 's1'")
		if strings.Contains(after, "hunter2") || strings.Contains(after, "argon2") {
			t.Fatalf("revision holds the secret: %s", after)
		}
		if !strings.Contains(after, `"sec":"********"`) {
			t.Fatalf("revision %s does not mask sec", after)
		}
	})
	t.Run("a hash string is stored as is", func(t *testing.T) {
		h := "$sha256$0011$" + strings.Repeat("ab", 32)
		entries := parse(t, `{classname: t, keyname: s2}`)
		entries[0].Set("sec", h)
		if res, err := db.Load(ctx, entries, store.LoadOptions{}); err != nil || res.Errors != 0 {
			t.Fatalf("load: %v %v", err, res)
		}
		if got, want := instance(t, db, "t", "s2").Data["sec"], any(h); got != want {
			t.Fatalf("stored: got %v, want %v", got, want)
		}
	})
}

func TestCardinalMin(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- classname: _schema
  keyname: c
  name: {dataformat: string, cardinal_min: 1}
  owners: {dataformat: string, cardinal_min: 2, cardinal_max: 0}
`, store.LoadOptions{})
	tests := []struct {
		name, doc string
		ok        bool
		field     string
	}{
		{"all required values are accepted", `{classname: c, keyname: a, name: n, owners: "x, y"}`, true, ""},
		{"a missing single value is refused", `{classname: c, keyname: b, owners: [x, y]}`, false, "name"},
		{"an empty single value is refused", `{classname: c, keyname: b, name: "", owners: [x, y]}`, false, "name"},
		{"too few list values are refused", `{classname: c, keyname: b, name: n, owners: [x]}`, false, "owners"},
		{"empty list items do not count", `{classname: c, keyname: b, name: n, owners: "x,,"}`, false, "owners"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := load(t, db, tt.doc, store.LoadOptions{})
			if tt.ok {
				if got, want := res.Errors, 0; got != want {
					t.Fatalf("errors: got %d, want %d (%s)", got, want, messages(res))
				}
				return
			}
			if got, want := res.Errors, 1; got != want {
				t.Fatalf("errors: got %d, want %d", got, want)
			}
			if msg := res.Messages[0].Message; !strings.Contains(msg, "field "+tt.field) {
				t.Fatalf("message %q does not name the field %s", msg, tt.field)
			}
		})
	}
	t.Run("update removing a required value is refused", func(t *testing.T) {
		res := load(t, db, `{classname: c, keyname: a, name: null}`, store.LoadOptions{})
		if got, want := res.Errors, 1; got != want {
			t.Fatalf("errors: got %d, want %d", got, want)
		}
		if got, want := fmtValue(instance(t, db, "c", "a").Data["name"]), "string(n)"; got != want {
			t.Fatalf("name: got %s, want %s", got, want)
		}
	})
}

func TestDefaultsOnCreate(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- classname: _schema
  keyname: d
  status: {dataformat: string, default: active}
  level: {dataformat: int, default: "3"}
  flags: {dataformat: string, cardinal_max: 0, default: "a,b"}
  note: {dataformat: string}
`, store.LoadOptions{})
	mustLoad(t, db, `
- {classname: d, keyname: new}
- {classname: d, keyname: given, status: retired, level: 9}
- {classname: d, keyname: old, note: x}
`, store.LoadOptions{})
	t.Run("missing fields get their default", func(t *testing.T) {
		in := instance(t, db, "d", "new")
		for field, want := range map[string]string{"status": "string(active)", "level": "int64(3)", "flags": "[]interface {}([a b])"} {
			if got := fmtValue(in.Data[field]); got != want {
				t.Fatalf("%s: got %s, want %s", field, got, want)
			}
		}
		if v, ok := in.Data["note"]; ok {
			t.Fatalf("note without default: got %s, want none", fmtValue(v))
		}
	})
	t.Run("given values win over defaults", func(t *testing.T) {
		in := instance(t, db, "d", "given")
		if got, want := fmtValue(in.Data["status"]), "string(retired)"; got != want {
			t.Fatalf("status: got %s, want %s", got, want)
		}
		if got, want := fmtValue(in.Data["level"]), "int64(9)"; got != want {
			t.Fatalf("level: got %s, want %s", got, want)
		}
	})
	t.Run("an update does not apply defaults", func(t *testing.T) {
		exec(t, db, `UPDATE instances SET data = '{"note":"x"}' WHERE classname = 'd' AND keyname = 'old'`)
		mustLoad(t, db, `{classname: d, keyname: old, note: y}`, store.LoadOptions{})
		if v, ok := instance(t, db, "d", "old").Data["status"]; ok {
			t.Fatalf("status after update: got %s, want none", fmtValue(v))
		}
	})
	t.Run("built-in defaults apply", func(t *testing.T) {
		mustLoad(t, db, `{classname: _apikey, keyname: k1}`, store.LoadOptions{})
		if got, want := fmtValue(instance(t, db, "_apikey", "k1").Data["is_readonly"]), "bool(true)"; got != want {
			t.Fatalf("is_readonly: got %s, want %s", got, want)
		}
	})
}
