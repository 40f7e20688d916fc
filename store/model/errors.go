// Package model holds the domain of the store without its SQL: entries and their
// preparation, schemas and their fields, values with their normalisation and their
// JSON/YAML encoding, secret hashing, the error type with its codes, actions, and the
// access rules (the permission table, grant containment) over Auth. It imports no
// database/sql, so the codecs and the callers of the store use it without the engine;
// the store answers what needs the database (RefResolver).
package model

import (
	"errors"
	"fmt"
)

// Error codes. The server maps them to HTTP statuses in one table.
const (
	ENotFound     = "not_found"
	EInvalid      = "invalid"
	EConflict     = "conflict"
	EUnauthorized = "unauthorized"
	EForbidden    = "forbidden"
	EInternal     = "internal"
	// ETooLarge is the code of a request that is bigger than a documented bound.
	ETooLarge = "too_large"
	// EDiskFull is the code of a write that failed because the filesystem holding the
	// database (its file, its write-ahead log, or a load body spooled beside it) has no
	// space left. It is the operator's problem, not the caller's, and not a bug: the
	// server answers 507 with a message naming the file.
	EDiskFull = "disk_full"
	// EPrecondition is the code of a conditional write (If-Match) whose condition no
	// longer holds: the instance changed (or went) since the caller read it.
	EPrecondition = "precondition_failed"
)

// Error is the one error type of the store: a code and a message safe to show a caller.
type Error struct {
	Code    string
	Message string
	// Problems lists every problem when the error stands for several (Message is then
	// the first one's); empty for an error that is one problem.
	Problems []Problem
	// err is the cause, when there is one worth keeping for the log (a full disk's
	// SQLite error); the caller sees only Message.
	err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// wrapf is Errorf keeping cause for the log: errors.Is and errors.As see it, the
// caller sees only the message.
func wrapf(cause error, code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), err: cause}
}

// HasCode reports whether err has an *Error with the given code in its chain (the
// first one found decides). An error that is no *Error has none of the codes: the
// store's ErrorCode also recognises the engine's errors.
func HasCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// DiskFullError is the EDiskFull error of cause, naming what could not be written.
func DiskFullError(what string, cause error) *Error {
	return wrapf(cause, EDiskFull, "disk full: no space left on the filesystem holding %s; "+
		"free space there (or move the file to a larger filesystem), then retry", what)
}

// ServerDiskFullError is the EDiskFull error of cause for a database on a database
// server (PostgreSQL's SQLSTATE 53100): the space to free is the server's, not this
// host's, and the message names no address (it reaches API clients).
func ServerDiskFullError(cause error) *Error {
	return wrapf(cause, EDiskFull, "disk full: the database server has no space left for the database; "+
		"free space on the server's disk (or grow it), then retry")
}

// messageOf is the caller-safe message of err: an *Error's, else "internal error".
func messageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
