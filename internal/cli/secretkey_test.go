package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestSecretKeyFileSetting: SERVICE_SECRET_KEY_FILE is checked before anything is
// opened: a file group or others may read, or one that does not hold 64 hex digits, is
// refused naming the variable; a usable file, or one not made yet, is taken (absolute);
// nodes compare the key the file holds, not its path.
func TestSecretKeyFileSetting(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := strings.Repeat("0f", 32)
	for path, want := range map[string]string{
		write("world.key", key, 0o604):    "has mode 0604: group and others must have no access",
		write("short.key", "0f0f", 0o600): "must hold 64 hex digits (32 bytes)",
	} {
		_, err := loadSettings(envOf(map[string]string{"SERVICE_SECRET_KEY_FILE": path}), &settingFlags{})
		if err == nil || !strings.Contains(err.Error(), "SERVICE_SECRET_KEY_FILE") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal naming the variable and %q", filepath.Base(path), err, want)
		}
	}
	good := write("good.key", key+"\n", 0o600)
	s, err := loadSettings(envOf(map[string]string{"SERVICE_SECRET_KEY_FILE": good}), &settingFlags{})
	if err != nil || s.SecretKeyFile != good {
		t.Fatalf("a usable key file: %v (%q)", err, s.SecretKeyFile)
	}
	if got := nodeSettings(s)["SERVICE_SECRET_KEY_FILE"]; got != key {
		t.Fatalf("nodes compare %q, want the key", got)
	}
	other := write("other.key", key, 0o600) // another path, the same key
	if got := nodeSettings(&settings{SecretKeyFile: other})["SERVICE_SECRET_KEY_FILE"]; got != key {
		t.Fatalf("the same key under another path compares as %q", got)
	}
	if _, err := loadSettings(envOf(map[string]string{"SERVICE_SECRET_KEY_FILE": filepath.Join(dir, "later.key")}), &settingFlags{}); err != nil {
		t.Fatalf("a key file not made yet: %v", err)
	}
}

// TestCopyTellsOfSealedSecrets: copy carries encrypted secrets sealed and says that
// the source's key file must go with them, naming it.
func TestCopyTellsOfSealedSecrets(t *testing.T) {
	t.Parallel()
	src := testkit.MigratedFile(t)
	db := testkit.Open(t, src, testkit.Options{IgnoreCloseError: true})
	testkit.MustLoad(t, db, `
- {classname: _schema, keyname: svc, token: {dataformat: secret, dataformat_ext: encrypted}}
- {classname: svc, keyname: a, token: tok-1}
- {classname: svc, keyname: b, token: tok-2}
`, store.LoadOptions{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy.db")
	code, out, stderr := runCLI(t, map[string]string{"SERVICE_LOG_LEVEL": "warn"}, "copy", "--from", src, "--to", dst)
	if code != 0 {
		t.Fatalf("copy: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "encrypted secrets copied sealed: 2; the target opens them only with the source's key file") {
		t.Fatalf("copy's report does not tell of the sealed secrets:\n%s", out)
	}
	if !testkit.Postgres() && !strings.Contains(out, src+".key") {
		t.Fatalf("copy's report does not name the key file %s.key:\n%s", src, out)
	}
	if strings.Contains(out, "tok-1") {
		t.Fatalf("copy's report shows a secret:\n%s", out)
	}
}

// TestBackupAndRestoreTellOfSealedSecrets: backup and restore say, when the database
// holds encrypted secrets, that they went sealed and which key file they open with
// (neither command moves it); without any, they say nothing of it.
func TestBackupAndRestoreTellOfSealedSecrets(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	keyFile := filepath.Join(t.TempDir(), "signing.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("0f", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	env["SERVICE_SECRET_KEY_FILE"] = keyFile
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.bak")
	code, out, stderr := runCLI(t, env, "backup", plain)
	if code != 0 {
		t.Fatalf("backup: exit %d: %s%s", code, out, stderr)
	}
	if strings.Contains(out, "sealed") {
		t.Fatalf("backup of a database without encrypted secrets speaks of them:\n%s", out)
	}
	loadDoc(t, env, `
- {classname: _schema, keyname: svc, token: {dataformat: secret, dataformat_ext: encrypted}}
- {classname: svc, keyname: a, token: tok-1}
- {classname: svc, keyname: b, token: tok-2}
`)
	file := filepath.Join(dir, "sealed.bak")
	code, out, stderr = runCLI(t, env, "backup", file)
	if code != 0 {
		t.Fatalf("backup: exit %d: %s%s", code, out, stderr)
	}
	if !strings.Contains(out, "encrypted secrets backed up sealed: 2; they open only with the key file ("+keyFile+")") {
		t.Fatalf("backup's report does not name the key file of the sealed secrets:\n%s", out)
	}
	code, out, stderr = runCLI(t, env, "restore", file)
	if code != 0 {
		t.Fatalf("restore: exit %d: %s%s", code, out, stderr)
	}
	if !strings.Contains(out, "encrypted secrets restored sealed: 2; they open only with the key of the database the backup was taken from, in the key file "+keyFile) {
		t.Fatalf("restore's report does not name the key file of the sealed secrets:\n%s", out)
	}
	if strings.Contains(out, "tok-1") {
		t.Fatalf("restore's report shows a secret:\n%s", out)
	}
	code, out, stderr = runCLI(t, env, "restore", plain)
	if code != 0 {
		t.Fatalf("restore: exit %d: %s%s", code, out, stderr)
	}
	if strings.Contains(out, "sealed") {
		t.Fatalf("restore of a backup without encrypted secrets speaks of them:\n%s", out)
	}
}
