package model_test

import (
	"errors"
	"fmt"
	"testing"

	"dataservice/store/model"
)

func TestHasCode(t *testing.T) {
	cause := errors.New("disk said no")
	e := model.DiskFullError("the database", cause)
	wrapped := fmt.Errorf("write: %w", e)
	if !model.HasCode(wrapped, model.EDiskFull) {
		t.Fatalf("HasCode(%v, EDiskFull) = false, want true", wrapped)
	}
	if model.HasCode(wrapped, model.EInvalid) {
		t.Fatalf("HasCode(%v, EInvalid) = true, want false", wrapped)
	}
	if model.HasCode(cause, model.EInternal) {
		t.Fatalf("HasCode of a plain error = true, want false")
	}
	if got, want := e.Error(), "disk full: no space left on the filesystem holding the database; "+
		"free space there (or move the file to a larger filesystem), then retry"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(wrapped, cause) {
		t.Fatalf("errors.Is(wrapped, cause) = false: DiskFullError lost the cause")
	}
	if errors.Unwrap(model.Errorf(model.EInvalid, "x")) != nil {
		t.Fatalf("Errorf has a cause, want none")
	}
}
