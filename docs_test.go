package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"dataservice/store"
)

// TestConfigurationDocNamesEveryEntry: docs/configuration.md has a row for every
// configuration entry the code defines, with its default, and for every SERVICE_*
// setting the code reads.
func TestConfigurationDocNamesEveryEntry(t *testing.T) {
	b, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, d := range store.ConfigDefs {
		row := regexp.MustCompile("(?m)^\\| `" + d.Keyname + "` \\| `" + regexp.QuoteMeta(d.Default) + "` \\|")
		if !row.MatchString(doc) {
			t.Errorf("docs/configuration.md has no row for %s with default %q", d.Keyname, d.Default)
		}
	}
	src, err := os.ReadFile("internal/cli/settings.go")
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`"(SERVICE_[A-Z_]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(vars) < 10 {
		t.Fatalf("found only %d settings in internal/cli/settings.go", len(vars))
	}
	for _, v := range vars {
		if !strings.Contains(doc, "| `"+v[1]+"` |") {
			t.Errorf("docs/configuration.md has no row for the setting %s", v[1])
		}
	}
}
