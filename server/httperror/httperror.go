// Package httperror maps the store's error codes to HTTP statuses: the one table the
// API and the web console share, so a refusal has the same status in both.
package httperror

import (
	"net/http"

	"dataservice/store"
	"dataservice/store/model"
)

// statuses are the HTTP statuses of the store's error codes. The API's statuses are
// the documented contract (docs/api.md, "Error statuses"); the console follows them.
var statuses = map[string]int{
	model.ENotFound:     http.StatusNotFound,
	model.EInvalid:      http.StatusBadRequest,
	model.EConflict:     http.StatusConflict,
	model.EUnauthorized: http.StatusUnauthorized,
	model.EForbidden:    http.StatusForbidden,
	model.EInternal:     http.StatusInternalServerError,
	model.ETooLarge:     http.StatusRequestEntityTooLarge,
	model.EDiskFull:     http.StatusInsufficientStorage,
	model.EPrecondition: http.StatusPreconditionFailed,
}

// Status is the HTTP status of err, by its store error code (store.ErrorCode): an
// error that is no store error, or has a code this table does not know, is internal
// (500).
func Status(err error) int {
	if s, ok := statuses[store.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}
