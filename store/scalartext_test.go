package store_test

import (
	"testing"

	"dataservice/rules"
	"dataservice/store"
)

const scalarSchema = `
- classname: _schema
  keyname: part
  serial: {dataformat: string}
  notes: {dataformat: text}
  codes: {dataformat: string, cardinal_max: 0}
  qty: {dataformat: int}
  weight: {dataformat: float}
  flag: {dataformat: boolean}
`

// An unquoted scalar in a text-valued field keeps its source text; typed fields get
// the value the text spells.
func TestLoadKeepsScalarSourceText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		field, yaml, want string
	}{
		{"serial", "1e3", "string(1e3)"},
		{"serial", "1.5e3", "string(1.5e3)"},
		{"serial", "0.1e1", "string(0.1e1)"},
		{"serial", "0o17", "string(0o17)"},
		{"serial", "0x1F", "string(0x1F)"},
		{"serial", "0815", "string(0815)"},
		{"serial", "0777", "string(0777)"},
		{"serial", "1.50", "string(1.50)"},
		{"serial", "1_000", "string(1_000)"},
		{"serial", "+5", "string(+5)"},
		{"serial", "True", "string(True)"},
		{"serial", "5", "string(5)"},
		{"serial", "-5", "string(-5)"},
		{"serial", "1.5", "string(1.5)"},
		{"serial", "true", "string(true)"},
		{"serial", "'1e3'", "string(1e3)"},
		{"notes", "1e3", "string(1e3)"},
		{"codes", "[1e3, 0o17, 7]", "[]interface {}([1e3 0o17 7])"},
		{"qty", "1e3", "int64(1000)"},
		{"qty", "0o17", "int64(15)"},
		{"qty", "0x1F", "int64(31)"},
		{"qty", "0b101", "int64(5)"},
		{"qty", "0815", "int64(815)"},
		{"qty", "0777", "int64(777)"}, // decimal, as YAML 1.2 reads it
		{"qty", "1_000", "int64(1000)"},
		{"qty", "+5", "int64(5)"},
		{"qty", "10.0", "int64(10)"},
		{"qty", "5", "int64(5)"},
		{"weight", "1.2345e2", "float64(123.45)"},
		{"weight", "1.50", "float64(1.5)"},
		{"weight", "1_000.5", "float64(1000.5)"},
		{"weight", "0x10", "int64(16)"}, // integral numbers read back as int64
		{"flag", "True", "bool(true)"},
		{"flag", "FALSE", "bool(false)"},
	}
	db := newTestDB(t)
	mustLoad(t, db, scalarSchema, store.LoadOptions{})
	for _, c := range cases {
		t.Run(c.field+" "+c.yaml, func(t *testing.T) {
			mustLoad(t, db, "- {classname: part, keyname: p1, "+c.field+": "+c.yaml+"}", store.LoadOptions{})
			if got := fmtValue(instance(t, db, "part", "p1").Data[c.field]); got != c.want {
				t.Fatalf("%s: %s stored as %s, want %s", c.field, c.yaml, got, c.want)
			}
		})
	}
	t.Run("keyname and displayname keep their text", func(t *testing.T) {
		mustLoad(t, db, "- {classname: part, keyname: 1e3, displayname: 0o17}", store.LoadOptions{})
		if got, want := instance(t, db, "part", "1e3").Displayname, "0o17"; got != want {
			t.Fatalf("displayname = %q, want %q", got, want)
		}
	})
	t.Run("schema attributes spelled as numbers still read as numbers", func(t *testing.T) {
		mustLoad(t, db, "- {classname: _schema, keyname: part, serial: {order: 1e2, cardinal_max: 1.0}}", store.LoadOptions{})
		f := schema(t, db, "part").Field("serial")
		if f.Order != 100 || f.CardinalMax != 1 {
			t.Fatalf("order %d, cardinal_max %d; want 100, 1", f.Order, f.CardinalMax)
		}
	})
}

// A load-time pipeline's values keep their source text too.
func TestLoadPipelineValuesKeepSourceText(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, scalarSchema, store.LoadOptions{})
	tr, err := rules.LoadTransform(`
- field_set: ['', serial, 1e3]
- field_set: ['', notes, 0o17]
- field_set: ['', qty, 1e3]
- field_append: ['', codes, 1.50]
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustLoad(t, db, "- {classname: part, keyname: p1, codes: x}", store.LoadOptions{Transform: tr})
	in := instance(t, db, "part", "p1")
	for f, want := range map[string]string{"serial": "string(1e3)", "notes": "string(0o17)", "qty": "int64(1000)",
		"codes": "[]interface {}([x1.50])"} {
		if got := fmtValue(in.Data[f]); got != want {
			t.Fatalf("%s = %s, want %s", f, got, want)
		}
	}
}
