package rules

import (
	"fmt"
	"reflect"
	"testing"
)

const benchContent = `
- field_lower: email
- set_condition: [is_admin, field_match, email, '@admin\.example\.com$']
- field_set: [is_admin, role, admin]
- field_regexp_sub: ['', phone, '[^0-9+]', '']
- field_copy: ['', displayname, label]
- field_delete: ['', tmp]
`

func benchEntry() Entry {
	return Entry{
		"classname":   "Person",
		"keyname":     "jdoe",
		"displayname": "John Doe",
		"email":       "John.Doe@Admin.Example.com",
		"phone":       "+33 (1) 23-45-67-89",
		"city":        "Paris",
		"department":  "IT",
		"tmp":         "scratch",
	}
}

func TestBenchPipeline(t *testing.T) {
	e := benchEntry()
	discard, err := mustParse(t, benchContent).Apply(e, testNow)
	if err != nil || discard {
		t.Fatalf("Apply = %v, %v", discard, err)
	}
	assertEntry(t, e, Entry{
		"classname":   "Person",
		"keyname":     "jdoe",
		"displayname": "John Doe",
		"email":       "john.doe@admin.example.com",
		"phone":       "+33123456789",
		"city":        "Paris",
		"department":  "IT",
		"role":        "admin",
		"label":       "John Doe",
	})
}

// BenchmarkApply measures Apply of a 5-rule pipeline (field_lower, field_set
// gated by a field_match condition, field_regexp_sub, field_copy,
// field_delete) over an entry of 8 string fields. Each iteration first
// restores the entry with already-boxed values, which does not allocate, so
// the reported allocations are Apply's.
func BenchmarkApply(b *testing.B) {
	p := mustParse(b, benchContent)
	orig := benchEntry()
	e := benchEntry()
	b.ReportAllocs()
	for b.Loop() {
		for k := range e {
			if _, ok := orig[k]; !ok {
				delete(e, k)
			}
		}
		for k, v := range orig {
			e[k] = v
		}
		if _, err := p.Apply(e, testNow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyNoChange is Apply over an entry the pipeline leaves as is.
func BenchmarkApplyNoChange(b *testing.B) {
	p := mustParse(b, benchContent)
	e := benchEntry()
	if _, err := p.Apply(e, testNow); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Apply(e, testNow); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchContent); err != nil {
			b.Fatal(err)
		}
	}
}

func TestConcurrentApply(t *testing.T) {
	p := mustParse(t, benchContent)
	want := benchEntry()
	if _, err := p.Apply(want, testNow); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 200 {
				e := benchEntry()
				if _, err := p.Apply(e, testNow); err != nil {
					errs <- err
					return
				}
				if !reflect.DeepEqual(e, want) {
					errs <- fmt.Errorf("entry = %#v, want %#v", e, want)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
