package main

import (
	"net"
	"os"
	"strings"
	"testing"
)

// A SERVICE_VERSION that is not MAJOR.MINOR.PATCH[-RCn], or that sorts below 4.0.0,
// is refused before the database is opened, naming the variable: it would be written
// to DB_VERSION and the next start refused.
func TestServiceVersionIsCheckedBeforeOpening(t *testing.T) {
	for _, v := range []string{" 4.9.0", "4.9.0 ", "3.0.0", "4.9", "v4.9.0", "4.9.0-beta"} {
		t.Run(v, func(t *testing.T) {
			env := testEnv(t)
			env["SERVICE_VERSION"] = v
			code, _, stderr := runCLI(t, env, "migrate")
			if code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			if !strings.Contains(stderr, "SERVICE_VERSION") {
				t.Fatalf("stderr %q does not name SERVICE_VERSION", stderr)
			}
			if _, err := os.Stat(env["SERVICE_DB"]); !os.IsNotExist(err) {
				t.Fatalf("database created despite an invalid SERVICE_VERSION (stat err %v)", err)
			}
		})
	}
	for _, v := range []string{"4.9.0", "4.9.0-RC2", "4.10.0"} {
		t.Run(v+" is accepted", func(t *testing.T) {
			env := testEnv(t)
			env["SERVICE_VERSION"] = v
			if code, _, stderr := runCLI(t, env, "migrate"); code != 0 {
				t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
			}
		})
	}
}

func TestExposedWithoutBaseURL(t *testing.T) {
	cases := []struct {
		addr, base string
		want       bool
	}{
		{"127.0.0.1:8080", "", false},
		{"[::1]:8080", "", false},
		{"127.0.0.5:8080", "", false},
		{"0.0.0.0:8080", "", true},
		{"[::]:8080", "", true},
		{"10.1.2.3:8080", "", true},
		{"0.0.0.0:8080", "https://data.example.test", false},
	}
	for _, c := range cases {
		addr, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := exposedWithoutBaseURL(addr, c.base); got != c.want {
			t.Errorf("exposedWithoutBaseURL(%s, %q) = %v, want %v", c.addr, c.base, got, c.want)
		}
	}
}
