package tasks

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestResultJSONMatchesResult: the checkpoint's encoding of a result, with its lists
// encoded once per change, equals json.Marshal of the result at every step of a run
// whose lists grow, stop growing at maxListed and start empty.
func TestResultJSONMatchesResult(t *testing.T) {
	t.Parallel()
	res := &Result{}
	x := &pipelineRun{res: res}
	check := func(step string) {
		t.Helper()
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if got := x.resultJSON(); string(got) != string(want) {
			t.Fatalf("%s:\n got %s\nwant %s", step, got, want)
		}
	}
	check("empty")
	for i := 0; i < 3*maxListed+10; i++ {
		res.Scanned++
		if i%2 == 0 {
			res.Updated++
			x.record(Change{Classname: "host", Keyname: fmt.Sprintf("h%d", i), Action: "update",
				Fields: map[string]FieldChange{"name": {Old: "a\u2028", New: int64(i)}}})
		}
		if i%3 == 1 {
			res.Errors++
			if len(res.ErrorMessages) < maxListed {
				res.ErrorMessages = append(res.ErrorMessages, fmt.Sprintf("host h%d: <bad> & \"worse\"", i))
			}
		}
		check(fmt.Sprintf("step %d", i))
	}
	if len(res.Changes) != maxListed || len(res.ErrorMessages) != maxListed {
		t.Fatalf("lists did not fill: %d changes, %d messages", len(res.Changes), len(res.ErrorMessages))
	}
}
