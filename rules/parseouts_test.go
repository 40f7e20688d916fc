package rules

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A rule may name any number of fields: the fields it writes are kept once each, in
// order, and parsing stays linear in them. 100,000 names, each given twice, took
// 37 s of CPU when each name was looked up by a scan of the ones before; the
// bound is ten times what the linear parse takes on a slow machine.
func TestRuleWithManyFieldsParsesInLinearTime(t *testing.T) {
	const n = 100_000
	var b strings.Builder
	b.WriteString("- field_add: ['', ")
	for i := range 2 * n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "f%d", i%n)
	}
	b.WriteString("]\n")
	before := cpu(t)
	p, err := Parse(b.String())
	used := cpu(t) - before
	if err != nil {
		t.Fatal(err)
	}
	outs := p.rules[0].outs
	if len(outs) != n {
		t.Fatalf("%d fields written, want %d (each once)", len(outs), n)
	}
	for i, o := range outs {
		if want := fmt.Sprintf("f%d", i); o != want {
			t.Fatalf("field %d is %s, want %s (the order they are named in)", i, o, want)
		}
	}
	t.Logf("parsed %d names in %v of CPU", 2*n, used)
	if used > 5*time.Second {
		t.Fatalf("parsing took %v of CPU: not linear in the fields a rule names", used)
	}
}

// cpu is the CPU time this process has used.
func cpu(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
