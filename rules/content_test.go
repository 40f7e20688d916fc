package rules

import "testing"

func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"flat list is kept byte for byte", "# c\n- field_noop: ''\n", "# c\n- field_noop: ''\n", false},
		{"empty list is kept", "[]", "[]", false},
		{"tagged list is kept (Parse refuses it when saved or run)", "- field_delete: [!c, env]\n", "- field_delete: [!c, env]\n", false},
		{"tasks wrapper becomes its list", "tasks:\n  - field_lower: email\n", "- field_lower: email\n", true},
		{"deprecated keys are dropped with the wrapper", "classname: x\nkeyfield: k\nencoding: utf-8\ncsv_delimiter: ','\ntasks: [{field_noop: ''}]\n", "- {field_noop: ''}\n", true},
		{"empty tasks list becomes []", "tasks: []\n", "[]", true},
		{"mapping without tasks becomes []", "rules: [a]\n", "[]", true},
		{"tasks that is not a list becomes []", "tasks: field_noop\n", "[]", true},
		{"scalar becomes []", "hello\n", "[]", true},
		{"invalid YAML becomes []", "- [unclosed\n", "[]", true},
		{"empty text becomes []", "", "[]", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := Normalize(tt.in)
			if got != tt.want {
				t.Fatalf("content: got %q, want %q", got, tt.want)
			}
			if changed != tt.changed {
				t.Fatalf("changed: got %v, want %v", changed, tt.changed)
			}
			again, changed := Normalize(got)
			if again != got || changed {
				t.Fatalf("second normalization: got %q (changed %v), want %q unchanged", again, changed, got)
			}
		})
	}
}
