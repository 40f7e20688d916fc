package rules

import (
	"maps"
	"reflect"
	"testing"
	"time"
)

// testNow is the fixed clock of the tests.
var testNow = time.Date(2024, time.March, 31, 13, 45, 30, 0, time.UTC)

// mustParse parses content or fails the test.
func mustParse(t testing.TB, content string) *Pipeline {
	t.Helper()
	p, err := Parse(content)
	if err != nil {
		t.Fatalf("Parse(%q): %v", content, err)
	}
	return p
}

// mustApply parses content and applies it to a copy of in, failing the test
// on any error or discard.
func mustApply(t testing.TB, content string, in Entry) Entry {
	t.Helper()
	e := maps.Clone(in)
	if e == nil {
		e = Entry{}
	}
	discard, err := mustParse(t, content).Apply(e, testNow)
	if err != nil {
		t.Fatalf("Apply(%q): %v", content, err)
	}
	if discard {
		t.Fatalf("Apply(%q) discarded the entry", content)
	}
	return e
}

// assertEntry fails the test when got and want differ (types included).
func assertEntry(t testing.TB, got, want Entry) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entry = %#v, want %#v", got, want)
	}
}
