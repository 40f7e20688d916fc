package cli

import (
	"net"
	"os"
	"strings"
	"testing"
)

// A SERVICE_VERSION that is not MAJOR.MINOR.PATCH, alone or followed by "-" and a
// suffix of 1 to 64 printable ASCII characters without spaces, or that sorts below
// 4.0.0, is refused before the database is opened, naming the variable: it would be
// written to DB_VERSION and the next start refused.
func TestServiceVersionIsCheckedBeforeOpening(t *testing.T) {
	t.Parallel()
	for _, v := range []string{" 4.9.0", "4.9.0 ", "   ", "3.0.0", "4.9", "v4.9.0", "4.9.0-", "4.9.0-RC 1",
		"4.9.0-" + strings.Repeat("x", 65)} {
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
	for _, v := range []string{"4.9.0", "4.9.0-RC2", "4.10.0", "4.9.0-rc1", "4.9.0-RC1-hotfix", "4.9.0-beta",
		"4.9.0-" + strings.Repeat("x", 64)} {
		t.Run(v+" is accepted", func(t *testing.T) {
			env := testEnv(t)
			env["SERVICE_VERSION"] = v
			code, out, stderr := runCLI(t, env, "migrate")
			if code != 0 || !strings.Contains(out, "DB_VERSION "+v+" ") {
				t.Fatalf("exit %d, want 0 and DB_VERSION %s; stdout %q stderr %s", code, v, out, stderr)
			}
		})
	}
}

// The seed's release-candidate rule, as it is written: a block re-runs when
// SERVICE_VERSION starts with "<block>-RC". 4.9.0-RC1-hotfix is a release candidate of
// 4.9.0; 4.9.0-rc1 is not (case matters), so it only sets its version.
func TestReleaseCandidateRuleAsTheSeedWritesIt(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	for v, want := range map[string]string{
		"4.9.0-RC1-hotfix": "pending: 4.9.0, set DB_VERSION 4.9.0-RC1-hotfix\n",
		"4.9.0-rc1":        "pending: set DB_VERSION 4.9.0-rc1\n",
	} {
		env["SERVICE_VERSION"] = v
		code, out, stderr := runCLI(t, env, "migrate", "--status")
		if code != 0 || !strings.HasSuffix(out, want) {
			t.Fatalf("%s: migrate --status exit %d, %q (want it to end %q); %s", v, code, out, want, stderr)
		}
	}
}

func TestExposedWithoutBaseURL(t *testing.T) {
	t.Parallel()
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
