package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store/model"
)

// TestConsoleAnswersTheAPIStatuses: a store error the console shows answers the status
// the API answers for its code (server/httperror), on an error page and on a form. The
// console used to answer 500 for too_large on an error page, and 400 for unauthorized
// and too_large on a form.
func TestConsoleAnswersTheAPIStatuses(t *testing.T) {
	db := testkit.NewMigratedDB(t, testkit.Options{})
	c := New(Options{DB: db, Logger: testkit.Logger(t, 0)})
	sch, err := db.Schema(t.Context(), "_user")
	if err != nil {
		t.Fatal(err)
	}
	errorPage := func(w http.ResponseWriter, r *http.Request, err error) { c.fail(w, r, nil, err) }
	form := func(w http.ResponseWriter, r *http.Request, err error) {
		c.formError(w, r, nil, &formData{Schema: sch, New: true}, "New _user", err)
	}
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request, error)
		code   string
		want   int
	}{
		{"too large on an error page is 413", errorPage, model.ETooLarge, http.StatusRequestEntityTooLarge},
		{"unauthorized on an error page is 401", errorPage, model.EUnauthorized, http.StatusUnauthorized},
		{"not found on an error page is 404", errorPage, model.ENotFound, http.StatusNotFound},
		{"unauthorized on a form is 401", form, model.EUnauthorized, http.StatusUnauthorized},
		{"too large on a form is 413", form, model.ETooLarge, http.StatusRequestEntityTooLarge},
		{"forbidden on a form is 403", form, model.EForbidden, http.StatusForbidden},
		{"invalid on a form is 400", form, model.EInvalid, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tc.answer(w, httptest.NewRequest(http.MethodPost, "/data/private/_user/?do=new", nil), model.Errorf(tc.code, "the refusal"))
			if got := w.Code; got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			if !strings.Contains(w.Body.String(), "the refusal") {
				t.Fatalf("the page does not show the store's message:\n%s", w.Body.String())
			}
		})
	}
}
