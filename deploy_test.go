package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The deployment files cannot be run here (no container engine, no systemd as PID 1);
// .ci/run checks the unit with systemd-analyze verify. These tests pin what the files
// promise in docs/deployment.md, so an edit cannot quietly drop it.

func TestSystemdUnitIsHardened(t *testing.T) {
	b, err := os.ReadFile("deploy/dataservice.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, line := range []string{
		"ExecStart=/usr/local/bin/dataservice serve",
		"DynamicUser=yes",
		"StateDirectory=dataservice",
		"StateDirectoryMode=0700",
		"ProtectSystem=strict",
		"NoNewPrivileges=yes",
		"ProtectHome=yes",
		"PrivateTmp=yes",
		"CapabilityBoundingSet=",
		"UMask=0077",
		"EnvironmentFile=/etc/dataservice/dataservice.env",
		"Environment=SERVICE_DB=/var/lib/dataservice/dataservice.db",
		"KillSignal=SIGTERM",
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `$`).MatchString(unit) {
			t.Errorf("unit lacks %q", line)
		}
	}
	// No secret may be written into the unit itself (it is world-readable).
	if regexp.MustCompile(`(?m)^Environment=.*(PASSWORD|SECRET)`).MatchString(unit) {
		t.Error("a secret is set in the unit file; it belongs in the 0600 EnvironmentFile")
	}
}

func TestDockerfileIsScratchNonRootWithAVolume(t *testing.T) {
	b, err := os.ReadFile("deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], l)
		}
	}
	if len(stages) == 0 {
		t.Fatal("no FROM")
	}
	final := strings.Join(stages[len(stages)-1], "\n")
	for _, re := range []string{
		`^FROM scratch\n`,
		`(?m)^COPY .*dataservice /dataservice$`,
		`(?m)^USER [1-9][0-9]*:[1-9][0-9]*$`,
		`(?m)^VOLUME \["/data"\]$`,
		`SERVICE_DB=/data/dataservice\.db`,
		`(?m)^ENTRYPOINT \["/dataservice"\]$`,
	} {
		if !regexp.MustCompile(re).MatchString(final) {
			t.Errorf("final stage does not match %s:\n%s", re, final)
		}
	}
	if strings.Contains(final, "RUN ") {
		t.Error("the scratch stage cannot RUN anything")
	}
}

// TestComposeRunsTwoNodesOnPostgres: deploy/compose.yaml is YAML describing PostgreSQL and
// two nodes that reach it through a postgres:// SERVICE_DB, each published on its own
// loopback port, with no proxy in front.
func TestComposeRunsTwoNodesOnPostgres(t *testing.T) {
	b, err := os.ReadFile("deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.Services["postgres"].Image, "postgres:") {
		t.Errorf("no postgres service: %+v", doc.Services["postgres"])
	}
	ports := map[string]bool{}
	for _, name := range []string{"node1", "node2"} {
		n, ok := doc.Services[name]
		if !ok {
			t.Fatalf("no %s service", name)
		}
		if db := n.Environment["SERVICE_DB"]; !strings.HasPrefix(db, "postgres://") || !strings.Contains(db, "@postgres:5432/") {
			t.Errorf("%s: SERVICE_DB %q is not the postgres service's URL", name, db)
		}
		if len(n.Ports) != 1 || !strings.HasPrefix(n.Ports[0], "127.0.0.1:") || ports[n.Ports[0]] {
			t.Errorf("%s: ports %v, want one loopback port of its own", name, n.Ports)
		}
		ports[n.Ports[0]] = true
	}
	if len(doc.Services) != 3 {
		t.Errorf("%d services, want postgres and two nodes (no proxy)", len(doc.Services))
	}
	checkComposeRole(t, doc.Services["postgres"].Environment, doc.Services["postgres"].Volumes, doc.Services["node1"].Environment["SERVICE_DB"])
}

// checkComposeRole: the nodes connect as a role that is not the postgres image's
// superuser (POSTGRES_USER, postgres by default), created by an init script the
// postgres service mounts, with LOGIN and no superuser, owning the nodes' database.
func checkComposeRole(t *testing.T, pgEnv map[string]string, volumes []string, serviceDB string) {
	t.Helper()
	super := pgEnv["POSTGRES_USER"]
	if super == "" {
		super = "postgres"
	}
	// The URL holds ${...} (the password's setting), which a URL parser refuses.
	m := regexp.MustCompile(`^postgres://([^:@/]+)[:@].*@[^/@]+/([^?]+)`).FindStringSubmatch(serviceDB)
	if m == nil {
		t.Fatalf("SERVICE_DB %q names no user and database", serviceDB)
	}
	role, dbname := m[1], m[2]
	if role == super {
		t.Fatalf("the nodes connect as %s, the image's superuser", role)
	}
	var initDir string
	for _, v := range volumes {
		if host, target, ok := strings.Cut(strings.TrimSuffix(v, ":ro"), ":"); ok && target == "/docker-entrypoint-initdb.d" {
			initDir = filepath.Join("deploy", host)
		}
	}
	if initDir == "" {
		t.Fatalf("the postgres service mounts no /docker-entrypoint-initdb.d: %v", volumes)
	}
	scripts, _ := filepath.Glob(filepath.Join(initDir, "*"))
	var all string
	for _, f := range scripts {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all += string(b)
	}
	createRole := regexp.MustCompile(`(?i)CREATE ROLE ` + regexp.QuoteMeta(role) + `\b([^;]*);`).FindStringSubmatch(all)
	if createRole == nil || !regexp.MustCompile(`(?i)\bLOGIN\b`).MatchString(createRole[1]) ||
		!regexp.MustCompile(`(?i)\bNOSUPERUSER\b`).MatchString(createRole[1]) {
		t.Errorf("the init scripts in %s create no role %s with LOGIN and NOSUPERUSER", initDir, role)
	}
	if !regexp.MustCompile(`(?i)CREATE DATABASE ` + regexp.QuoteMeta(dbname) + ` OWNER ` + regexp.QuoteMeta(role) + `\b`).MatchString(all) {
		t.Errorf("the init scripts in %s create no database %s owned by %s", initDir, dbname, role)
	}
	if strings.Contains(all, "SUPERUSER") && !strings.Contains(all, "NOSUPERUSER") {
		t.Errorf("the init scripts grant a superuser")
	}
}
