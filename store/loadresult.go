package store

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// EntryError describes one failed entry.
type EntryError struct {
	File      string `json:"file,omitempty" yaml:"file,omitempty"`
	Index     int    `json:"index" yaml:"index"`
	Classname string `json:"classname" yaml:"classname"`
	Keyname   string `json:"keyname" yaml:"keyname"`
	Message   string `json:"message" yaml:"message"`
	// Problems are every problem of the entry, in entry order (Message is the first's).
	Problems []model.Problem `json:"errors" yaml:"errors"`
	// seq is the entry's place in the load, which orders the messages: an entry retried
	// for an unresolved reference fails after the entries that follow it.
	seq int
}

func (e EntryError) String() string {
	return e.where() + ": " + e.Message
}

func (e EntryError) where() string {
	where := fmt.Sprintf("entry %d", e.Index)
	if e.File != "" {
		where = e.File + ": " + where
	}
	return fmt.Sprintf("%s (%s %s)", where, e.Classname, e.Keyname)
}

// Lines are the entry's problems, one line each, every one naming the entry.
func (e EntryError) Lines() []string {
	if len(e.Problems) == 0 {
		return []string{e.String()}
	}
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = e.where() + ": " + p.Message
	}
	return out
}

// LoadResult counts the outcome of every entry.
type LoadResult struct {
	Created   int          `json:"created" yaml:"created"`
	Updated   int          `json:"updated" yaml:"updated"`
	Unchanged int          `json:"unchanged" yaml:"unchanged"`
	Deleted   int          `json:"deleted" yaml:"deleted"`
	Enabled   int          `json:"enabled" yaml:"enabled"`
	Disabled  int          `json:"disabled" yaml:"disabled"`
	Skipped   int          `json:"skipped" yaml:"skipped"`
	Errors    int          `json:"errors" yaml:"errors"`
	DryRun    bool         `json:"dryrun" yaml:"dryrun"`
	Messages  []EntryError `json:"error_messages" yaml:"error_messages"`
	// Warnings are problems that did not stop an entry (e.g. a repaired YAML line).
	Warnings []string `json:"warnings,omitempty" yaml:"warnings,omitempty"`
	// UnknownFields counts the values of entries under a name their schema has no
	// field of (ignored, or with Strict refused); UnknownFieldNames lists the first
	// distinct ones as class.field, at most MaxUnknownFieldNames.
	UnknownFields     int      `json:"unknown_fields" yaml:"unknown_fields"`
	UnknownFieldNames []string `json:"unknown_field_names,omitempty" yaml:"unknown_field_names,omitempty"`
	// maxSeq is the largest seq of Messages.
	maxSeq int
	// namesCut is set when UnknownFieldNames left names out.
	namesCut bool
	// strict is the load's Strict: its unknown fields were refused, not ignored.
	strict bool
}

// MaxUnknownFieldNames bounds the unknown field names a load result lists.
const MaxUnknownFieldNames = 20

// noteUnknown counts the unknown field names of one entry of class cls.
func (r *LoadResult) noteUnknown(cls string, names []string) {
	r.UnknownFields += len(names)
	for _, n := range names {
		q := clip.Text(cls + "." + n)
		switch {
		case slices.Contains(r.UnknownFieldNames, q):
		case len(r.UnknownFieldNames) >= MaxUnknownFieldNames:
			r.namesCut = true
		default:
			r.UnknownFieldNames = append(r.UnknownFieldNames, q)
		}
	}
}

// finish orders the messages by entry and adds the warning of the unknown fields.
func (r *LoadResult) finish() {
	sort.SliceStable(r.Messages, func(i, j int) bool { return r.Messages[i].seq < r.Messages[j].seq })
	if r.UnknownFields > 0 {
		more := ""
		if r.namesCut {
			more = ", ..."
		}
		what := "ignored"
		if r.strict {
			what = "refused"
		}
		were := "were"
		if r.UnknownFields == 1 {
			were = "was"
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d %s under unknown field names %s %s (%s%s)",
			r.UnknownFields, plural(r.UnknownFields, "value"), were, what, strings.Join(r.UnknownFieldNames, ", "), more))
	}
}

// Add merges r2 into r.
func (r *LoadResult) Add(r2 *LoadResult) {
	r.Created += r2.Created
	r.Updated += r2.Updated
	r.Unchanged += r2.Unchanged
	r.Deleted += r2.Deleted
	r.Enabled += r2.Enabled
	r.Disabled += r2.Disabled
	r.Skipped += r2.Skipped
	r.Errors += r2.Errors
	r.UnknownFields += r2.UnknownFields
	for _, n := range r2.UnknownFieldNames {
		switch {
		case slices.Contains(r.UnknownFieldNames, n):
		case len(r.UnknownFieldNames) >= MaxUnknownFieldNames:
			r.namesCut = true
		default:
			r.UnknownFieldNames = append(r.UnknownFieldNames, n)
		}
	}
	r.namesCut = r.namesCut || r2.namesCut
	for _, m := range r2.Messages {
		if len(r.Messages) < MaxErrorMessages {
			r.Messages = append(r.Messages, m)
		}
	}
}

// Loaded is the number of entries counted with an outcome (every one but the failed).
func (r *LoadResult) Loaded() int {
	return r.Created + r.Updated + r.Unchanged + r.Deleted + r.Enabled + r.Disabled + r.Skipped
}

// MaxErrorMessages bounds the error messages a load result lists; Errors counts all.
const MaxErrorMessages = 100

func (r *LoadResult) count(outcome string) {
	switch outcome {
	case OutCreated:
		r.Created++
	case OutUpdated:
		r.Updated++
	case OutUnchanged:
		r.Unchanged++
	case OutDeleted:
		r.Deleted++
	case OutEnabled:
		r.Enabled++
	case OutDisabled:
		r.Disabled++
	case OutSkipped:
		r.Skipped++
	}
}

// fail records the failure of e, the seq-th entry of the load. Once the list is full,
// an entry retried by the second pass still takes the place of a later one.
func (r *LoadResult) fail(e *model.Entry, err error, seq int) {
	r.Errors++
	if len(r.Messages) >= MaxErrorMessages {
		if seq >= r.maxSeq {
			return
		}
		last := 0
		for i, m := range r.Messages {
			if m.seq > r.Messages[last].seq {
				last = i
			}
		}
		r.Messages = slices.Delete(r.Messages, last, last+1)
		r.maxSeq = 0
		for _, m := range r.Messages {
			r.maxSeq = max(r.maxSeq, m.seq)
		}
	}
	cls, key := e.Classname, e.Keyname
	if cls == "" || key == "" {
		// prepare failed or a keyname mode rewrote nothing yet: name the entry as written.
		cls, key = e.Key()
	}
	// The entry is named as written, which may be any size: cut like quoted input.
	r.Messages = append(r.Messages, EntryError{File: e.File, Index: e.Index, Classname: clip.Text(cls),
		Keyname: clip.Text(key), Message: ErrorMessage(err), Problems: ErrorProblems(err), seq: seq})
	r.maxSeq = max(r.maxSeq, seq)
}
