package cli

import (
	"regexp"
	"strings"
	"testing"
)

// load prints every problem of each failed entry, entries in file order: an entry
// retried for a reference that never resolves is reported in its place, not after
// the entries that follow it (which printed 1, 3, 2). Unknown field names are a
// warning; --strict refuses them.
func TestLoadPrintsEveryErrorInEntryOrder(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	schema := writeFile(t, "schema.yml", `- {classname: _schema, keyname: site}
- classname: _schema
  keyname: rack
  site: {dataformat: schema, dataformat_ext: site}
  units: {dataformat: int, dataformat_ext: gte_1 lte_60}
  mgmt: {dataformat: ipv4}
- {classname: site, keyname: paris}
`)
	if code, _, stderr := runCLI(t, env, "load", schema); code != 0 {
		t.Fatalf("load schema: %s", stderr)
	}
	file := writeFile(t, "racks.yml", `- {classname: rack, keyname: r1, units: 99, site: paris, mgmt: 10.0.0.300}
- {classname: rack, keyname: r2, site: nowhere}
- {classname: rack, keyname: r3, units: zero, colour: red}
- {classname: rack, keyname: r4, units: 4, site: paris}
`)
	code, out, stderr := runCLI(t, env, "load", file)
	if code != 1 || !strings.Contains(out, "created 1,") || !strings.Contains(out, "errors 3") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^error: racks\.yml: entry \d+ \(rack (r\d)\): field (\w+):`).FindAllStringSubmatch(stderr, -1) {
		got = append(got, m[1]+"."+m[2])
	}
	if want := "r1.units r1.mgmt r2.site r3.units"; strings.Join(got, " ") != want {
		t.Fatalf("errors in the order %v, want %s; stderr:\n%s", got, want, stderr)
	}
	if !strings.Contains(stderr, "warning: 1 value under unknown field names was ignored (rack.colour)\n") {
		t.Fatalf("no warning of the unknown field: %s", stderr)
	}

	strict := writeFile(t, "strict.yml", "- {classname: rack, keyname: r5, units: 5, colour: red, size: big}\n")
	code, out, stderr = runCLI(t, env, "load", "--strict", strict)
	if code != 1 || !strings.Contains(out, "errors 1") ||
		!strings.Contains(stderr, `error: strict.yml: entry 1 (rack r5): unknown field "colour" of rack (a strict load refuses it)`) ||
		!strings.Contains(stderr, `error: strict.yml: entry 1 (rack r5): unknown field "size" of rack (a strict load refuses it)`) {
		t.Fatalf("--strict: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, env, "load", strict); code != 0 || !strings.Contains(out, "created 1,") {
		t.Fatalf("without --strict: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}
