package main

import (
	"os"
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
}
