package rules

import (
	"errors"
	"strings"
	"testing"
)

// Parse names every bad rule of a list, not only the first: the rules that do not
// compile in list order, then the gates naming a condition nobody sets. The error's
// message is the first one's, as it was when only one was reported.
func TestParseListsEveryBadRule(t *testing.T) {
	_, err := Parse(`
- field_uper: ['', a]
- field_upper: ['', a]
- field_copy: ['', a, b, c]
- field_set: [nowhere, a, x]
- field_noop: !!str x
`)
	var le *ListError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T), want a *ListError", err, err)
	}
	want := []string{
		`rule 1: unknown rule "field_uper"`,
		"rule 3: field_copy takes",
		"rule 5: line 6: YAML tag",
		`rule 4: field_set: unknown condition "nowhere"`,
	}
	got := le.Messages()
	if len(got) != len(want) {
		t.Fatalf("messages %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Fatalf("message %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if err.Error() != got[0] {
		t.Fatalf("Error() = %q, want the first message %q", err.Error(), got[0])
	}
	if err := Check("- field_upper: ['', a]\n"); err != nil {
		t.Fatalf("a good list: %v", err)
	}
}
