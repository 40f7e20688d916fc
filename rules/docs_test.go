package rules

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDocsNameEveryRule: docs/pipelines.md names every rule and checker the parser
// accepts (taken from the tables specs and checkers), each in a table row of its own
// with an example that parses, and names nothing the parser refuses.
func TestDocsNameEveryRule(t *testing.T) {
	b, err := os.ReadFile("../docs/pipelines.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rowNames := map[string]string{} // first cell of a table row → the row
	for _, line := range strings.Split(doc, "\n") {
		if m := regexp.MustCompile("^\\| `([a-z0-9_]+)` \\|").FindStringSubmatch(line); m != nil {
			rowNames[m[1]] = line
		}
	}
	var names []string
	for n := range specs {
		names = append(names, n)
	}
	for n := range checkers {
		names = append(names, n)
	}
	sort.Strings(names)
	example := regexp.MustCompile("`(- [a-z0-9_]+: .*?)`")
	for _, n := range names {
		row, ok := rowNames[n]
		if !ok {
			t.Errorf("docs/pipelines.md has no table row for %q", n)
			continue
		}
		ex := example.FindAllStringSubmatch(row, -1)
		if len(ex) == 0 {
			t.Errorf("the row of %q has no example", n)
			continue
		}
		for _, e := range ex {
			// A row's example gates on conditions its pipeline would set.
			if _, err := parse(e[1]+"\n", false); err != nil {
				t.Errorf("example of %q does not parse: %s: %v", n, e[1], err)
			}
		}
	}
	if !strings.Contains(doc, "`set_condition:") && !strings.Contains(doc, "`set_condition`") {
		t.Error("docs/pipelines.md does not describe set_condition")
	}
	// Every rule-like name documented in a table row must be one the parser accepts.
	for n, row := range rowNames {
		if _, ok := specs[n]; ok {
			continue
		}
		if _, ok := checkers[n]; ok {
			continue
		}
		if strings.HasPrefix(n, "field_") || n == "discard" {
			t.Errorf("docs/pipelines.md documents %q, which the parser refuses: %s", n, row)
		}
	}
	for _, action := range []string{"create", "update", "init", "noop", "delete", "disable", "enable"} {
		if !strings.Contains(doc, "`"+action+"`") {
			t.Errorf("docs/pipelines.md does not name _action %q", action)
		}
	}
	for _, want := range []string{"RE2", "`''`", "`NAME`", "`'!NAME'`", "scanned", "discarded", "error_messages"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/pipelines.md does not mention %s", want)
		}
	}
}
