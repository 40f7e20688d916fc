package store

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
)

// Error is the one error type of the store: a code and a message safe to show a caller.
type Error struct {
	Code    string
	Message string
	// err is the cause, when there is one worth keeping for the log (a full disk's
	// SQLite error); the caller sees only Message.
	err error
	// dryRun marks a full disk met by a dry run in its private database: not a write
	// of the database, so no disk-full episode of it (NoSpace passes it through).
	dryRun bool
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err: the code of an *Error in its chain, else
// EDiskFull for a full disk that no write path named yet, else EInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if isDiskFull(err) {
		return EDiskFull
	}
	return EInternal
}

// ErrorMessage returns the caller-safe message of err; internal errors read "internal error".
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	if isDiskFull(err) {
		return diskFullError("the database", err).Message
	}
	return "internal error"
}

// IsNotFound reports whether err is a not-found error.
func IsNotFound(err error) bool { return ErrorCode(err) == ENotFound }
