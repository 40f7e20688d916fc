package bootstrap_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
)

// Current tells a command other than serve and migrate whether it may use the file as
// it is: only a DB_VERSION equal to the code version passes; a release candidate's
// re-run blocks do not count once its version is stored. It changes nothing.
func TestCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		stored  string // "" = a new database, never started; else set after one start
		code    string
		want    error  // nil: current
		message string // part of the error
	}{
		{"never started", "", testVersion, bootstrap.ErrNeedsMigrate, "no DB_VERSION"},
		{"current", testVersion, testVersion, nil, ""},
		{"older", "4.8.0", testVersion, bootstrap.ErrNeedsMigrate, `DB_VERSION "4.8.0", SERVICE_VERSION 4.9.0`},
		{"release candidate of the code's release", "4.9.0-RC1", "4.9.0", bootstrap.ErrNeedsMigrate, "SERVICE_VERSION 4.9.0"},
		{"release candidate stored and run", "4.9.0-RC1", "4.9.0-RC1", nil, ""},
		{"code moves to a release candidate", "4.9.0", "4.9.0-RC2", bootstrap.ErrNeedsMigrate, "SERVICE_VERSION 4.9.0-RC2"},
		{"newer as numbers, older as text", "4.10.0", "4.9.0", bootstrap.ErrNewerData, `DB_VERSION "4.10.0", this is 4.9.0`},
		{"newer major", "5.0.0", "4.9.0", bootstrap.ErrNewerData, "5.0.0"},
		{"newer major that sorts below 4.0.0 as text", "10.0.0", "4.9.0", bootstrap.ErrNewerData, "10.0.0"},
		{"older as numbers, newer as text", "4.9.0", "4.10.0", bootstrap.ErrNeedsMigrate, "SERVICE_VERSION 4.10.0"},
		{"too old to migrate", "3.9.0", testVersion, bootstrap.ErrRefused, "3.9.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			if c.stored != "" {
				o := options(t, &testkit.Recorder{})
				run(t, db, o)
				setRegistry(t, db, store.RegDBVersion, c.stored)
			}
			before := snapshot(t, db)
			reg := registry(t, db)
			err := bootstrap.Current(ctx, db, c.code)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("Current = %v, want nil", err)
			case c.want != nil && (!errors.Is(err, c.want) || !strings.Contains(err.Error(), c.message)):
				t.Fatalf("Current = %v, want %v saying %q", err, c.want, c.message)
			}
			if after := snapshot(t, db); after != before {
				t.Fatalf("Current changed data: %s", diffLines(before, after))
			}
			if after := registry(t, db); len(after) != len(reg) || after[store.RegDBVersion] != reg[store.RegDBVersion] {
				t.Fatalf("Current changed the registry: %v -> %v", reg, after)
			}
		})
	}
}
