package model

import (
	"errors"
	"testing"
)

// Problems keeps every refusal with its field, answers with the first one's code and
// message, lets IsUnresolved see an unresolved reference anywhere in the list, and
// hands back an error that is no refusal (the caller stops on it).
func TestProblems(t *testing.T) {
	var p Problems
	if p.Err() != nil {
		t.Fatal("an empty collection is an error")
	}
	p.Add("b", Errorf(EInvalid, "field b: bad"))
	p.Add("a", &errUnresolved{"field a: no x instance"})
	internal := errors.New("disk on fire")
	if got := p.Add("c", internal); got != internal {
		t.Fatalf("Add of an internal error = %v, want it back", got)
	}
	p.SortBy(func(f string) int { return map[string]int{"a": 0, "b": 1}[f] })
	err := p.Err()
	var e *Error
	if !errors.As(err, &e) || e.Code != EInvalid || e.Message != "field a: no x instance" || len(e.Problems) != 2 ||
		e.Problems[1] != (Problem{Field: "b", Code: EInvalid, Message: "field b: bad"}) {
		t.Fatalf("Err() = %#v", err)
	}
	if !IsUnresolved(err) {
		t.Fatal("an unresolved reference among the problems is not seen")
	}
	var q Problems
	q.Add("content", err) // a list inside a list keeps its items and their fields
	if got := q.Err().(*Error).Problems; len(got) != 2 || got[0].Field != "a" {
		t.Fatalf("nested problems %+v", got)
	}
}
