package store

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"dataservice/store/model"
)

// BenchmarkRevisionRow is the CPU of building the before and after of one update's
// revision row, for the pipeline benchmark's update of an odd instance (200 bytes of
// data, 5 of its 6 fields changed): "whole", the two whole documents an update wrote
// before delta rows (from the stored and the new encodings the write already had, by
// today's instanceDoc), against "delta", the delta row a write transaction builds now
// (the changed parts' old values, and the same whole after).
func BenchmarkRevisionRow(b *testing.B) {
	s := &model.Schema{Keyname: "item"}
	for i := 1; i <= 6; i++ {
		s.AddField(&model.Field{Keyname: fmt.Sprintf("f%d", i), Dataformat: "string"})
	}
	const raw = `{"f1":"Host-0001235-ABCDEF","f2":"value-0001235","f3":"three-0001235","f4":"a-b-c-d-0001235","f5":"copy-me-0001235-xyz","f6":"old-value-0001235-tail"}`
	data, err := model.DecodeData(raw)
	if err != nil {
		b.Fatal(err)
	}
	old := &Instance{Keyname: "item-0001235", IsEnabled: true, Data: data, raw: raw}
	nd := model.CloneMap(data)
	// The benchmark pipeline's rules on an odd instance.
	nd["f1"], nd["f3"], nd["f4"], nd["f6"] = "host-0001235-abcdef", "odd", "a_b_c_d_0001235", nd["f5"]
	delete(nd, "f2")
	next := &Instance{Keyname: old.Keyname, IsEnabled: true, Data: nd}
	enc := model.MustJSON(nd)
	var bytes int
	run := func(b *testing.B, row func() (string, string)) {
		c0 := processCPU(b)
		for b.Loop() {
			before, after := row()
			bytes = len(before) + len(after)
		}
		// CPU time rather than the wall clock alone: the machine may be shared.
		b.ReportMetric(float64(processCPU(b)-c0)/float64(b.N), "cpu-ns/row")
		b.ReportMetric(float64(bytes), "B/row")
	}
	b.Run("whole", func(b *testing.B) {
		run(b, func() (string, string) { return instanceDoc(s, old, old.raw), instanceDoc(s, next, enc) })
	})
	b.Run("delta", func(b *testing.B) {
		var w RevisionDeltas
		run(b, func() (string, string) { return w.Delta(s, old, next, enc) })
	})
}

// processCPU is the CPU time (user + system) the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
