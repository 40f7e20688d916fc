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
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err: the code of an *Error in its chain, else EInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the caller-safe message of err; internal errors read "internal error".
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// IsNotFound reports whether err is a not-found error.
func IsNotFound(err error) bool { return ErrorCode(err) == ENotFound }
