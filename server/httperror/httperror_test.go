package httperror_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"dataservice/server/httperror"
	"dataservice/store/model"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"not found is 404", model.Errorf(model.ENotFound, "x"), http.StatusNotFound},
		{"invalid is 400", model.Errorf(model.EInvalid, "x"), http.StatusBadRequest},
		{"conflict is 409", model.Errorf(model.EConflict, "x"), http.StatusConflict},
		{"unauthorized is 401", model.Errorf(model.EUnauthorized, "x"), http.StatusUnauthorized},
		{"forbidden is 403", model.Errorf(model.EForbidden, "x"), http.StatusForbidden},
		{"internal is 500", model.Errorf(model.EInternal, "x"), http.StatusInternalServerError},
		{"too large is 413", model.Errorf(model.ETooLarge, "x"), http.StatusRequestEntityTooLarge},
		{"disk full is 507", model.Errorf(model.EDiskFull, "x"), http.StatusInsufficientStorage},
		{"precondition failed is 412", model.Errorf(model.EPrecondition, "x"), http.StatusPreconditionFailed},
		{"a wrapped code keeps its status", fmt.Errorf("load: %w", model.Errorf(model.ETooLarge, "x")), http.StatusRequestEntityTooLarge},
		{"an unknown code is 500", model.Errorf("no_such_code", "x"), http.StatusInternalServerError},
		{"a plain error is 500", errors.New("boom"), http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := httperror.Status(tc.err); got != tc.want {
				t.Fatalf("Status(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
