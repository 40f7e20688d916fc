package store

import (
	"context"
	"slices"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// notApplied counts the values of e that differ from old's: with an _action of delete,
// enable or disable that action is the whole write, and these changes are not applied.
// Secret values are not compared (that would cost a hash each) and not counted.
func notApplied(s *model.Schema, e *model.Entry, old *Instance) int {
	n := 0
	if e.HasDisplayname && e.Displayname != old.Displayname {
		n++
	}
	for _, k := range e.Order {
		f := s.Field(k)
		if model.IsHeaderKey(k) || f == nil || f.Dataformat == "secret" || f.Dataformat == "external" {
			continue
		}
		v, present, err := f.Normalize(e.Fields[k], nil)
		ov, had := old.Data[k]
		if err != nil || present != had || present && !model.SameJSONValue(ov, v) {
			n++
		}
	}
	return n
}

// plural is word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// headerProblems is err, the refusal of e's header keys (Prepare), with the refusal of
// its keyname by the schema's keyname mode when the header gave one to check, then
// the problems of its field values.
func (tx *Tx) headerProblems(ctx context.Context, auth *model.Auth, e *model.Entry, err error) error {
	var probs model.Problems
	if probs.Add("", err) != nil {
		return err
	}
	if !probs.Has("classname") && !probs.Has("keyname") && e.Classname != "_schema" && e.Classname != "_permission" {
		if s, serr := tx.Schema(ctx, e.Classname); serr == nil {
			if kerr := e.ResolveKeyname(s); kerr != nil && probs.Add(keynameField(kerr), kerr) != nil {
				return kerr
			}
		}
	}
	return tx.withValueProblems(ctx, auth, e, probs.Err(), false)
}

// nameProblems checks e's keyname by s's keyname mode (ResolveKeyname) and refuses
// the unknown field names given: nil when neither has a problem, else every problem
// of e, the keyname's first (as the one error a caller saw before problems were
// collected; it is about the keyname, or the displayname a keyname mode derives it
// from), then the unknown names and the field values (in entry order when the keyname
// is good).
func (tx *Tx) nameProblems(ctx context.Context, auth *model.Auth, s *model.Schema, e *model.Entry, unknown []string) error {
	var probs model.Problems
	kerr := e.ResolveKeyname(s)
	if kerr != nil && probs.Add(keynameField(kerr), kerr) != nil {
		return kerr
	}
	for _, k := range unknown {
		probs.Add(k, model.Errorf(model.EInvalid, "unknown field %s of %s (a strict load refuses it)", clip.Quote(k), s.Keyname))
	}
	if probs.Len() == 0 {
		return nil
	}
	return tx.withValueProblems(ctx, auth, e, probs.Err(), kerr == nil)
}

// withValueProblems is err, a refusal of e's header, keyname or field names, with the
// problems of e's field values after it, so one answer names every problem of the
// entry. Values are checked only when e's class is an instance schema; cardinality is
// not (it depends on the stored object, which a refused header may not name). With
// ordered, every problem is put in entry order; else err's come first, as the one
// error a caller saw before problems were collected. Every writer of entries (the
// loader, a one-instance write) uses it, so their answers list the same problems.
// The values are checked only for a caller (auth; nil: the system) who may create or
// update instances of the class: checking a reference tells whether the instance it
// names exists, which a caller without those permissions learns from no other answer
// (the write would be refused before its values are looked at).
func (tx *Tx) withValueProblems(ctx context.Context, auth *model.Auth, e *model.Entry, err error, ordered bool) error {
	var probs model.Problems
	if probs.Add("", err) != nil || e.Classname == "" || e.Classname == "_schema" || e.Classname == "_permission" {
		return err
	}
	s, serr := tx.Schema(ctx, e.Classname)
	if serr != nil || !model.CanWrite(auth, s, model.ActionCreate) && !model.CanWrite(auth, s, model.ActionUpdate) {
		return err
	}
	if verr := tx.entryValues(ctx, s, e, nil, false, nil, &probs); verr != nil {
		return verr
	}
	if ordered {
		probs.SortBy(func(field string) int {
			if i := slices.Index(e.Order, field); i >= 0 {
				return i
			}
			return len(e.Order)
		})
	}
	return probs.Err()
}

// unknownFields lists the keys of e that name no field of s, in entry order: header
// keys, scratch keys (starting with _) and a _user entry's login are not fields.
func unknownFields(s *model.Schema, e *model.Entry) []string {
	var out []string
	for _, k := range e.Order {
		if model.IsHeaderKey(k) || strings.HasPrefix(k, "_") || s.Field(k) != nil ||
			k == "login" && s.Keyname == "_user" {
			continue
		}
		out = append(out, k)
	}
	return out
}
