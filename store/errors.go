package store

import (
	"errors"
	"strings"

	"dataservice/store/model"
)

// ErrorCode returns the code of err: the code of a *model.Error in its chain, else
// model.EDiskFull for a full disk that no write path named yet (the engine's own
// error, which only the store recognises), else model.EInternal.
func ErrorCode(err error) string {
	var e *model.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if isDiskFull(err) {
		return model.EDiskFull
	}
	if isBadText(err) {
		return model.EInvalid
	}
	return model.EInternal
}

// ErrorMessage returns the caller-safe message of err; internal errors read "internal error".
func ErrorMessage(err error) string {
	var e *model.Error
	if errors.As(err, &e) {
		return e.Message
	}
	if isDiskFull(err) {
		return model.DiskFullError("the database", err).Error()
	}
	if isBadText(err) {
		return badTextMessage
	}
	return "internal error"
}

// IsNotFound reports whether err is a not-found error.
func IsNotFound(err error) bool { return ErrorCode(err) == model.ENotFound }

// badTextMessage is the message of text the engine cannot hold.
const badTextMessage = "text holds a character the database cannot store (a NUL character)"

// ErrorProblems lists the problems of err, each with its field, code and caller-safe
// message: every one of an error that stands for several, else err itself as one
// problem of no field (ErrorCode and ErrorMessage).
func ErrorProblems(err error) []model.Problem {
	var e *model.Error
	if errors.As(err, &e) && len(e.Problems) > 0 {
		return append([]model.Problem(nil), e.Problems...)
	}
	return []model.Problem{{Code: ErrorCode(err), Message: ErrorMessage(err)}}
}

// ErrorText is the caller-safe message of err, or, when err stands for several
// problems (every bad value of an entry, every bad rule of a list), each problem's
// message joined by "; " in their order: for a caller that shows one line of text.
func ErrorText(err error) string {
	list := ErrorProblems(err)
	if len(list) < 2 {
		return ErrorMessage(err)
	}
	msgs := make([]string, len(list))
	for i, p := range list {
		msgs[i] = p.Message
	}
	return strings.Join(msgs, "; ")
}
