package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// SERVICE_BACKUP_DIR must name an existing directory (it is not created: a typo must
// not scatter backups); a relative one is made absolute, so logs name the place.
func TestBackupDirSetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]string{
		filepath.Join(dir, "missing"): "no such directory",
		file:                          "not a directory",
	} {
		_, err := loadSettings(envOf(map[string]string{"SERVICE_BACKUP_DIR": value}), &settingFlags{})
		if err == nil || !strings.Contains(err.Error(), "SERVICE_BACKUP_DIR") || !strings.Contains(err.Error(), want) {
			t.Fatalf("SERVICE_BACKUP_DIR=%s: %v, want an error naming the variable and %q", value, err, want)
		}
	}
	s, err := loadSettings(envOf(map[string]string{"SERVICE_BACKUP_DIR": dir}), &settingFlags{})
	if err != nil || s.BackupDir != dir {
		t.Fatalf("SERVICE_BACKUP_DIR=%s: %+v %v", dir, s, err)
	}
	if s, err = loadSettings(envOf(nil), &settingFlags{}); err != nil || s.BackupDir != "" {
		t.Fatalf("unset: %q %v, want empty", s.BackupDir, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if s, err = loadSettings(envOf(map[string]string{"SERVICE_BACKUP_DIR": "."}), &settingFlags{}); err != nil || s.BackupDir != wd {
		t.Fatalf("SERVICE_BACKUP_DIR=.: %q %v, want %s", s.BackupDir, err, wd)
	}
}

// migrate with SERVICE_BACKUP_DIR writes the backup before migrating there, on both
// engines. On PostgreSQL, without it, a migrate that must back up is refused (exit 1)
// naming SERVICE_BACKUP_DIR and SERVICE_BACKUP=off, and the data stays at its version.
func TestMigrateBackupDir(t *testing.T) {
	if _, err := exec.LookPath("pg_dump"); testkit.Postgres() && err != nil {
		t.Skipf("pg_dump is not on PATH (Debian: postgresql-client): %v", err)
	}
	t.Parallel()
	env := testEnv(t)
	old := quiet(env)
	old["SERVICE_VERSION"] = "4.8.0"
	migrateDB(t, old)
	if testkit.Postgres() {
		code, out, stderr := runCLI(t, env, "migrate")
		if code != 1 || !strings.Contains(stderr, "SERVICE_BACKUP_DIR is not set") || !strings.Contains(stderr, "SERVICE_BACKUP=off") {
			t.Fatalf("migrate without SERVICE_BACKUP_DIR: exit %d: %s%s", code, out, stderr)
		}
		if code, out, _ := runCLI(t, old, "migrate", "--status"); code != 0 || !strings.Contains(out, "DB_VERSION: 4.8.0\n") {
			t.Fatalf("after the refusal: exit %d, %q; want DB_VERSION 4.8.0", code, out)
		}
	}
	dir := t.TempDir()
	env["SERVICE_BACKUP_DIR"] = dir
	env["SERVICE_LOG_LEVEL"] = "info"
	if code, out, stderr := runCLI(t, env, "migrate"); code != 0 || !strings.Contains(stderr, `msg="backup before migrating"`) ||
		!strings.Contains(stderr, "file="+dir+string(os.PathSeparator)) {
		t.Fatalf("migrate with SERVICE_BACKUP_DIR: exit %d: %s%s", code, out, stderr)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	bak := regexp.MustCompile(`\.4\.8\.0\.\d{8}T\d{6}\.\d{3}Z\.bak$`)
	if len(names) != 1 || !bak.MatchString(names[0]) {
		t.Fatalf("files in SERVICE_BACKUP_DIR: %v, want one <name>.4.8.0.<timestamp>.bak", names)
	}
	if !testkit.Postgres() {
		if beside, _ := filepath.Glob(env["SERVICE_DB"] + ".*.bak"); len(beside) != 0 {
			t.Fatalf("backups beside the file: %v", beside)
		}
	}
}
