package cli

import (
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// A database URL that cannot be used fails every command at start: exit status 1,
// a message naming the host and the driver's reason, the password never shown, no
// panic, and nothing written anywhere (the wrong database is not created).
func TestUnusableDatabaseURLFailsAtStart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there any more
	type urlCase struct {
		name, url, host, reason string
	}
	cases := []urlCase{{"a closed port", "postgres://svc:hunter2-secret@" + closed + "/dataservice?sslmode=disable&connect_timeout=5",
		closed, "connect"},
		// The password given as a query parameter (password=, sslpassword=) hides too.
		{"a closed port, password in the query", "postgres://svc@" + closed + "/dataservice?sslmode=disable&password=hunter2-secret&sslpassword=hunter2-secret&connect_timeout=5",
			closed, "connect"},
		// A URL pgx refuses to parse (a port out of range): its error quotes the URL.
		{"a URL pgx refuses", "postgres://svc@" + closed + "0000/dataservice?password=hunter2-secret",
			"dataservice", "invalid port"}}
	var missingDB string
	if testkit.Postgres() {
		// A server that answers, but has no such database.
		raw, err := testkit.PostgresCluster()
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		missingDB = "dstest_no_such_database"
		u.Path = "/" + missingDB
		u.User = url.UserPassword(u.User.Username(), "hunter2-secret")
		cases = append(cases, urlCase{"a database that does not exist", u.String(), u.Host, "does not exist"})
		u.User = url.User(u.User.Username())
		q := u.Query()
		q.Set("password", "hunter2-secret")
		u.RawQuery = q.Encode()
		cases = append(cases, urlCase{"a database that does not exist, password in the query", u.String(), u.Host, "does not exist"})
	}
	for _, c := range cases {
		for _, args := range [][]string{{"migrate"}, {"serve"}, {"migrate", "--status"}, {"apikey", "list"}, {"backup", t.TempDir() + "/b.db"}} {
			t.Run(c.name+"/"+strings.Join(args, " "), func(t *testing.T) {
				env := testEnv(t)
				env["SERVICE_DB"] = c.url
				env["SERVICE_LISTEN"] = "127.0.0.1:0"
				code, out, stderr := runCLI(t, env, args...)
				if code != 1 {
					t.Fatalf("exit %d, want 1; stdout %q, stderr %q", code, out, stderr)
				}
				for _, want := range []string{c.host, c.reason} {
					if !strings.Contains(stderr, want) {
						t.Fatalf("stderr does not name %q:\n%s", want, stderr)
					}
				}
				for _, bad := range []string{"hunter2-secret", "panic", "goroutine "} {
					if strings.Contains(stderr+out, bad) {
						t.Fatalf("output holds %q:\nstdout %s\nstderr %s", bad, out, stderr)
					}
				}
			})
		}
	}
	if missingDB != "" {
		raw, _ := testkit.PostgresCluster()
		r, err := sql.Open("pgx", raw)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if n := queryInt(t, r, "SELECT count(*) FROM pg_database WHERE datname = $1", missingDB); n != 0 {
			t.Fatalf("database %s was created", missingDB)
		}
	}
}

// TestServerDiskFullIsAnOperatorsMessage is the PostgreSQL form of
// TestDiskFullIsAnOperatorsMessage: the server refuses writes with SQLSTATE 53100
// (disk_full), raised here by a trigger since the test cannot fill the shared
// cluster's disk. Writes answer 507 with a message about the server's disk (no file,
// no address), the episode is logged once, /readyz says so, the host's free-space
// gauges are absent, and writes work again once the server has room.
func TestServerDiskFullIsAnOperatorsMessage(t *testing.T) {
	t.Parallel()
	if !testkit.Postgres() {
		t.Skip("PostgreSQL only: SQLite's full disk is TestDiskFullIsAnOperatorsMessage's")
	}
	env := reliabilityEnv(t)
	env["SERVICE_METRICS_LISTEN"] = "127.0.0.1:0"
	env["SERVICE_ACCESS_LOG"] = "off"
	srv := startChild(t, env, "serve")
	api := newAPIClient(srv.baseURL())
	metricsURL := "http://" + regexp.MustCompile(`msg="metrics listening" addr=(127\.0\.0\.1:\d+)`).
		FindStringSubmatch(srv.out.String())[1] + "/metrics"
	api.json(t, "POST", "/api/load/", `[{classname: _schema, keyname: box, note: {dataformat: string}}]`, 200, nil)
	if strings.Contains(srv.out.String(), `msg="disk space low`) {
		t.Fatalf("free-space warning about this host on PostgreSQL:\n%s", tail(srv.out.String()))
	}

	raw, err := sql.Open("pgx", env["SERVICE_DB"])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{
		`CREATE FUNCTION dstest_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`,
		`CREATE TRIGGER dstest_disk_full BEFORE INSERT ON instances FOR EACH ROW EXECUTE FUNCTION dstest_disk_full()`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		code, b, err := api.do("POST", "/api/load/", "application/yaml", strings.NewReader(boxes("api", 0, 50)))
		if err != nil {
			t.Fatal(err)
		}
		var reply struct{ Error string }
		json.Unmarshal(b, &reply)
		if code != http.StatusInsufficientStorage || !strings.Contains(reply.Error, "disk full: the database server has no space left") {
			t.Fatalf("load %d on a full server: %d %s, want 507 about the server's disk", i, code, b)
		}
		for _, bad := range []string{"file", "postgres://", "127.0.0.1"} {
			if strings.Contains(reply.Error, bad) {
				t.Fatalf("load %d: the reply %q names %q", i, reply.Error, bad)
			}
		}
	}
	if n := strings.Count(srv.out.String(), `level=ERROR msg="disk full`); n != 1 {
		t.Fatalf("%d error lines for one disk-full episode of 3 requests, want 1:\n%s", n, tail(srv.out.String()))
	}
	var rz map[string]string
	api.json(t, "GET", "/readyz", "", 200, &rz)
	if rz["disk"] != "full" {
		t.Fatalf("/readyz on a full server: %v, want disk: full", rz)
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, gauge := range []string{"dataservice_disk_free_bytes ", "dataservice_db_size_bytes ", "dataservice_wal_size_bytes "} {
		if strings.Contains(string(b), "\n"+gauge) {
			t.Fatalf("/metrics has %s on PostgreSQL (a gauge of this host's files)", gauge)
		}
	}

	if _, err := raw.Exec(`DROP TRIGGER dstest_disk_full ON instances; DROP FUNCTION dstest_disk_full()`); err != nil {
		t.Fatal(err)
	}
	api.json(t, "POST", "/api/load/", boxes("api", 0, 50), 200, nil)
	api.json(t, "GET", "/readyz", "", 200, &rz)
	if rz["disk"] != "ok" {
		t.Fatalf("/readyz after a write committed: %v, want disk: ok", rz)
	}
}
