package model

import (
	"errors"
	"slices"
)

// Problem is one thing wrong with an input (a load entry, a form, a rule list): the
// field it is about ("" when it is about the whole input), the error code and the
// caller-safe message.
type Problem struct {
	Field   string `json:"field" yaml:"field"`
	Code    string `json:"code" yaml:"code"`
	Message string `json:"message" yaml:"message"`
}

// Problems collects the refusals of one input so that a caller sees every problem in
// one answer. The zero value is empty and ready to use.
type Problems struct {
	list []Problem
	errs []error
}

// Add records err (nil: nothing) as a problem of field. It returns err when it is no
// refusal (an internal error, a full disk): the caller then stops and returns it.
func (p *Problems) Add(field string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) || e.Code == EInternal || e.Code == EDiskFull {
		return err
	}
	if len(e.Problems) > 0 {
		// Already a list (a pipeline's rule list): keep its items, under field when they
		// name none.
		for _, q := range e.Problems {
			if q.Field == "" {
				q.Field = field
			}
			p.list = append(p.list, q)
			p.errs = append(p.errs, err)
		}
		return nil
	}
	p.list = append(p.list, Problem{Field: field, Code: e.Code, Message: e.Message})
	p.errs = append(p.errs, err) // one per problem: SortBy moves them together
	return nil
}

// Has reports whether a problem of field is recorded.
func (p *Problems) Has(field string) bool {
	for _, q := range p.list {
		if q.Field == field {
			return true
		}
	}
	return false
}

// Len is the number of problems recorded.
func (p *Problems) Len() int { return len(p.list) }

// SortBy orders the problems by the position rank gives their field (a stable sort:
// problems of one field, and fields rank does not know, keep their order after the
// known ones). A collection made while ranging a map is put in field order this way.
func (p *Problems) SortBy(rank func(field string) int) {
	if len(p.list) < 2 {
		return
	}
	idx := make([]int, len(p.list))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return rank(p.list[a].Field) - rank(p.list[b].Field) })
	list, errs := make([]Problem, len(idx)), make([]error, len(idx))
	for i, j := range idx {
		list[i], errs[i] = p.list[j], p.errs[j]
	}
	p.list, p.errs = list, errs
}

// Err is the error of the collection: nil when it is empty, else an *Error with the
// first problem's code and message (so a caller that reads one message reads what it
// did before problems were collected) that lists every problem and wraps the first
// error. An unresolved reference among the problems is wrapped instead, so IsUnresolved
// sees it and a loader retries the entry, then reports it as it stands.
func (p *Problems) Err() error {
	if len(p.list) == 0 {
		return nil
	}
	cause := p.errs[0]
	for _, err := range p.errs {
		if IsUnresolved(err) {
			cause = err
			break
		}
	}
	first := p.list[0]
	return &Error{Code: first.Code, Message: first.Message, Problems: slices.Clone(p.list), err: cause}
}

// ProblemsError is an error listing problems, with the first one's code and message.
// It panics on an empty list: callers build it from at least one problem.
func ProblemsError(list []Problem) *Error {
	first := list[0]
	return &Error{Code: first.Code, Message: first.Message, Problems: slices.Clone(list)}
}
