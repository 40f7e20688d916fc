package tasks_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"dataservice/rules"
	"dataservice/tasks"
)

// auditContent is the third audit's pipeline: a 16-byte value doubled by 16
// field_merge to 1 MiB, then field_join rules copying it into new scratch fields.
func auditContent(joins int) string {
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

func memStats() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// TestAuditPipelineTaskMemoryBounded: the audit's pipeline took the server to 4 GB and
// the resumed task left 3.4 GB in use. Each entry now fails at the rule that passes
// the entry bound, named in the task's messages; what the run allocates and what it
// leaves in use stay within ten times what the bound allows.
//
// Serial: it measures the process's heap, which parallel tests would grow.
func TestAuditPipelineTaskMemoryBounded(t *testing.T) {
	const hosts = 4
	db := newDB(t)
	insertRows(t, db, "host", markerRows(hosts))
	r := newRunner(t, db, tasks.Options{})
	// The smaller pipeline first: without the bound it holds 300 MiB an entry and
	// fails here, before the full one could take gigabytes.
	for _, joins := range []int{300, 3000} {
		ok := t.Run(fmt.Sprint(joins, " joins"), func(t *testing.T) {
			name := fmt.Sprint("audit_", joins)
			addPipeline(t, db, name, auditContent(joins), "")
			before := memStats()
			res := mustSucceed(t, runPipeline(t, r, name, false, "host"))
			after := memStats()
			if got, want := counts(res), fmt.Sprintf("scanned=%d updated=0 deleted=0 disabled=0 enabled=0 unchanged=0 discarded=0 errors=%d", hosts, hosts); got != want {
				t.Fatalf("counts: got %s, want %s", got, want)
			}
			for _, m := range res.ErrorMessages {
				if !strings.Contains(m, ": rule 32: field_join: the entry grew to ") || len(m) > 200 {
					t.Fatalf("error message %q does not name rule 32 (the 15th field_join)", m)
				}
			}
			t.Logf("allocated %d bytes, %d more in use", after.TotalAlloc-before.TotalAlloc, int64(after.HeapAlloc)-int64(before.HeapAlloc))
			// An entry makes its 1 MiB value, then 15 joins of 1 MiB each: about
			// twice MaxEntryBytes allocated with the builders' growth.
			if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(10*2*rules.MaxEntryBytes*hosts); got > limit {
				t.Fatalf("the run allocated %d bytes, want at most %d", got, limit)
			}
			if got, limit := int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(10*rules.MaxEntryBytes); got > limit {
				t.Fatalf("the run left %d more bytes in use, want at most %d", got, limit)
			}
		})
		if !ok {
			return
		}
	}
}
