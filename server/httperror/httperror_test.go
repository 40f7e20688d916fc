package httperror_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"dataservice/server/httperror"
	"dataservice/store"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"not found is 404", store.Errorf(store.ENotFound, "x"), http.StatusNotFound},
		{"invalid is 400", store.Errorf(store.EInvalid, "x"), http.StatusBadRequest},
		{"conflict is 409", store.Errorf(store.EConflict, "x"), http.StatusConflict},
		{"unauthorized is 401", store.Errorf(store.EUnauthorized, "x"), http.StatusUnauthorized},
		{"forbidden is 403", store.Errorf(store.EForbidden, "x"), http.StatusForbidden},
		{"internal is 500", store.Errorf(store.EInternal, "x"), http.StatusInternalServerError},
		{"too large is 413", store.Errorf(store.ETooLarge, "x"), http.StatusRequestEntityTooLarge},
		{"disk full is 507", store.Errorf(store.EDiskFull, "x"), http.StatusInsufficientStorage},
		{"a wrapped code keeps its status", fmt.Errorf("load: %w", store.Errorf(store.ETooLarge, "x")), http.StatusRequestEntityTooLarge},
		{"an unknown code is 500", store.Errorf("no_such_code", "x"), http.StatusInternalServerError},
		{"a plain error is 500", errors.New("boom"), http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := httperror.Status(tc.err); got != tc.want {
				t.Fatalf("Status(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
