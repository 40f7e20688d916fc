package model_test

import (
	"encoding/json"
	"testing"

	"dataservice/store/model"
)

// TestMergePatch: the object cases of RFC 7396's appendix A (the patch of a JSON merge
// patch request is an object; the cases whose patch is not one do not apply).
func TestMergePatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"a":"x"}`, `{"a":{"b":null,"c":1}}`, `{"a":{"c":1}}`},
	} {
		t.Run(tc.target+" patched with "+tc.patch, func(t *testing.T) {
			var target, patch map[string]any
			if err := json.Unmarshal([]byte(tc.target), &target); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.patch), &patch); err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(target)
			got, _ := json.Marshal(model.MergePatch(target, patch))
			if string(got) != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			if after, _ := json.Marshal(target); string(after) != string(before) {
				t.Fatalf("the target changed: %s, was %s", after, before)
			}
		})
	}
}
