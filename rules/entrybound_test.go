package rules

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// auditPipeline is the third audit's pipeline: a 16-byte seed doubled by merges to
// 1 MiB, then joins copying that value into new scratch fields, one per rule.
func auditPipeline(joins int) string {
	var b strings.Builder
	b.WriteString("- field_set: ['', _a, 0123456789abcdef]\n")
	for range 16 {
		b.WriteString("- field_merge: ['', _a, _a, _a]\n")
	}
	for i := range joins {
		fmt.Fprintf(&b, "- field_join: ['', _j%d, '', _a]\n", i)
	}
	return b.String()
}

// heapAfter is the live heap after GC while keep is still reachable.
func heapAfter(keep any) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	runtime.KeepAlive(keep)
	return m.HeapAlloc
}

// TestAuditPipelineFailsAtTheEntryBound: the audit's pipeline (16 field_merge, 3,000
// field_join) took a server to 4 GB. The entry now fails at the join that passes
// MaxEntryBytes, naming it, and the live heap stays within ten times the bound.
func TestAuditPipelineFailsAtTheEntryBound(t *testing.T) {
	// The smaller run first: without the bound it holds 300 MiB and fails here,
	// before the full pipeline could take gigabytes.
	for _, joins := range []int{300, 3000} {
		ok := t.Run(fmt.Sprint(joins, " joins"), func(t *testing.T) {
			p := mustParse(t, auditPipeline(joins))
			e := Entry{"classname": "server", "keyname": "s1"}
			before := heapAfter(nil)
			_, err := p.Apply(e, testNow)
			live := heapAfter(e)
			// Rules 1 to 17 make the 1 MiB value and each join adds 1 MiB: with the
			// field names, the 15th join (rule 32) passes 16 MiB.
			want := fmt.Sprintf("rule 32: field_join: the entry grew to %d bytes (at most %d in all its fields)",
				entryBytes(e), MaxEntryBytes)
			if err == nil || err.Error() != want {
				t.Fatalf("Apply error = %v, want %q", err, want)
			}
			if n := entryBytes(e); n > MaxEntryBytes+MaxValueBytes+64 {
				t.Fatalf("the failed entry holds %d bytes, want at most one value past %d", n, MaxEntryBytes)
			}
			if grown := int64(live) - int64(before); grown > 10*MaxEntryBytes {
				t.Fatalf("the live heap grew by %d bytes, want at most %d", grown, 10*MaxEntryBytes)
			}
		})
		if !ok {
			return
		}
	}
}

func TestEntryFieldBound(t *testing.T) {
	var b strings.Builder
	for i := range MaxEntryFields {
		fmt.Fprintf(&b, "- field_set: ['', _f%d, x]\n", i)
	}
	p := mustParse(t, b.String())
	e := Entry{"classname": "server", "keyname": "s1"}
	_, err := p.Apply(e, testNow)
	// classname and keyname are two fields: the 999th rule makes field 1001.
	want := fmt.Sprintf("rule %d: field_set: the entry grew to %d fields (at most %d)", MaxEntryFields-1, MaxEntryFields+1, MaxEntryFields)
	if err == nil || err.Error() != want {
		t.Fatalf("Apply error = %v, want %q", err, want)
	}
	// The same pipeline fits an entry two fields smaller.
	if _, err := p.Apply(Entry{}, testNow); err != nil {
		t.Fatalf("%d fields: %v", MaxEntryFields, err)
	}
}

// TestEntryBoundsCountWhatRulesAdd: the bounds count what the entry holds after each
// rule (a rename moves bytes, a delete or field_keep frees them), and an entry that
// came in past them still goes through rules that do not make it larger.
func TestEntryBoundsCountWhatRulesAdd(t *testing.T) {
	mib := strings.Repeat("x", MaxValueBytes)
	big := func(n int) Entry {
		e := Entry{"classname": "c", "keyname": "k"}
		for i := range n {
			e[fmt.Sprintf("f%d", i)] = mib
		}
		return e
	}
	tests := []struct {
		name    string
		in      Entry
		content string
		wantErr string
	}{
		{"renames move bytes", big(14), "- field_rename: ['', f0, g0]\n- field_rename: ['', f1, g1]\n- field_rename: ['', g0, f0]\n- field_copy: ['', f2, h]", ""},
		{"copies add bytes", big(14), "- field_copy: ['', f0, h]\n- field_copy: ['', f1, i]", "rule 2: field_copy: the entry grew to"},
		{"deletes free bytes", big(15), "- field_delete: ['', f0, f1]\n- field_copy: ['', f2, h]\n- field_copy: ['', f3, i]", ""},
		{"field_keep frees bytes", big(15), "- field_keep: ['', f0]\n- field_join: ['', _a, '', f0]\n- field_copy: ['', _a, _b]", ""},
		{"lists count their items", big(15), "- field_set: ['', l, [a, b]]\n- field_merge: ['', f0, f0, _m]", "rule 2: field_merge: field \"_m\": the value grew to"},
		{"an entry past the bound keeps shrinking rules", big(20), "- field_lower: ['', f0]\n- field_delete: ['', f1]\n- field_regexp_sub: ['', f2, '^x', y]", ""},
		{"an entry past the bound fails at a rule that adds", big(20), "- field_delete: ['', f1]\n- field_set: ['', s, 1]", "rule 2: field_set: the entry grew to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mustParse(t, tt.content).Apply(tt.in, testNow)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Apply: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("Apply error = %v, want %q...", err, tt.wantErr)
			}
		})
	}
}
