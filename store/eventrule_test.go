package store_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// eventRuleBase is what the event rule tests watch and run: a schema with a secret
// field, a plain one, and a pipeline.
const eventRuleBase = `
- {classname: _schema, keyname: server, env: {dataformat: string}, token: {dataformat: secret}}
- {classname: _pipeline, keyname: tidy, content: "- field_lower: env"}
`

// ruleProblems loads one _eventrule entry (doc: its fields, as a YAML flow mapping's
// inside) with auth and returns the problems it was refused with ("" fields when it
// loaded).
func ruleProblems(t *testing.T, db *store.DB, auth *model.Auth, doc string) []model.Problem {
	t.Helper()
	r := load(t, db, "- {classname: _eventrule, keyname: r1, "+doc+"}", store.LoadOptions{Auth: auth})
	if r.Errors == 0 {
		return nil
	}
	return r.Messages[0].Problems
}

// TestEventRuleRefusals: each thing wrong with an event rule is refused with a
// message naming it, on its field, and nothing is stored; a rule with several faults
// lists them all at once.
func TestEventRuleRefusals(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, eventRuleBase, store.LoadOptions{})
	hook := `webhook_url: "https://receiver.example/hook", secret: s3cret-signing-key`
	cases := []struct {
		name, doc, field, want string
	}{
		{"unknown schema", "schemas: [nope], " + hook, "schemas", `schemas: no schema "nope"`},
		{"_schema", "schemas: [_schema], " + hook, "schemas", "schemas: _schema cannot be watched"},
		{"_permission", "schemas: [_permission], " + hook, "schemas", "schemas: _permission cannot be watched"},
		{"unknown action", "schemas: [server], actions: [create, explode], " + hook, "actions", `actions: "explode" is not an action (expected create, update, delete, enable, disable, rename)`},
		{"nothing to do", "schemas: [server]", "webhook_url", "an event rule needs webhook_url (to deliver a webhook) or pipeline (to run one), or both"},
		{"not http", `schemas: [server], webhook_url: "ftp://x.example/", secret: abc`, "webhook_url", "not an http:// or https:// URL"},
		{"relative", `schemas: [server], webhook_url: "/hook", secret: abc`, "webhook_url", "not an http:// or https:// URL"},
		{"no host", `schemas: [server], webhook_url: "http:///hook", secret: abc`, "webhook_url", "the URL has no host"},
		{"user info", `schemas: [server], webhook_url: "https://u:p@x.example/", secret: abc`, "webhook_url", "the URL carries user information"},
		{"too long", `schemas: [server], webhook_url: "https://x.example/` + strings.Repeat("a", store.MaxWebhookURL) + `", secret: abc`, "webhook_url", "longer than the 2048"},
		{"no secret", `schemas: [server], webhook_url: "https://x.example/"`, "secret", "a webhook rule needs a secret: deliveries are signed with it"},
		{"unknown pipeline", "schemas: [server], pipeline: nope", "pipeline", `pipeline: no pipeline "nope"`},
		{"bad condition", "schemas: [server], pipeline: tidy, condition: '[nope, env]'", "condition", `condition: unknown checker "nope"`},
		{"bad regex", "schemas: [server], pipeline: tidy, condition: [field_match, env, '(']", "condition", "invalid regex"},
		{"condition on a secret", "schemas: [server], pipeline: tidy, condition: [changed, token]", "condition", "condition: token is a secret field of server: a condition cannot look at a secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			probs := ruleProblems(t, db, nil, c.doc)
			if len(probs) != 1 {
				t.Fatalf("problems = %+v, want one on %s", probs, c.field)
			}
			if probs[0].Field != c.field || probs[0].Code != model.EInvalid || !strings.Contains(probs[0].Message, c.want) {
				t.Fatalf("problem = %+v, want field %s, invalid, message containing %q", probs[0], c.field, c.want)
			}
			absent(t, db, "_eventrule", "r1")
		})
	}
	t.Run("every problem at once", func(t *testing.T) {
		probs := ruleProblems(t, db, nil, `schemas: [nope, _schema], actions: [boom], webhook_url: "ftp://x", pipeline: none`)
		var fields []string
		for _, p := range probs {
			fields = append(fields, p.Field)
		}
		if got, want := strings.Join(fields, ","), "schemas,schemas,actions,webhook_url,secret,pipeline"; got != want {
			t.Fatalf("problem fields = %s, want %s (%+v)", got, want, probs)
		}
	})
	t.Run("a valid rule loads, its condition list stored as text", func(t *testing.T) {
		if probs := ruleProblems(t, db, nil, "schemas: [server], actions: [create, rename], pipeline: tidy, condition: [field_match, env, '^prod$']"); probs != nil {
			t.Fatalf("refused: %+v", probs)
		}
		in := instance(t, db, "_eventrule", "r1")
		if got, want := in.Data["condition"], "[field_match, env, ^prod$]"; got != want {
			t.Fatalf("condition stored as %#v, want %q", got, want)
		}
		if got := in.Data[store.AuthorField]; got != "system" {
			t.Fatalf("author = %v, want system", got)
		}
	})
	t.Run("an update is checked too", func(t *testing.T) {
		s, err := db.Schema(t.Context(), "_eventrule")
		if err != nil {
			t.Fatal(err)
		}
		old := instance(t, db, "_eventrule", "r1")
		next := *old
		next.Data = model.CloneMap(old.Data)
		next.Data["pipeline"] = "gone"
		_, err = db.Apply(t.Context(), store.Write{Schema: s, Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{})
		if !strings.Contains(store.ErrorMessage(err), `pipeline: no pipeline "gone"`) {
			t.Fatalf("update to an unknown pipeline: %v", err)
		}
		if got := instance(t, db, "_eventrule", "r1").Data["pipeline"]; got != "tidy" {
			t.Fatalf("pipeline = %v after a refused update", got)
		}
	})
}

// TestEventRuleWatchingIsContained: watching a built-in class needs its write
// permission, as granting a permission needs holding it: a p_event_admin holder cannot
// watch _apikey without p_apikey_admin, and can with it; a user schema needs its read
// permission.
func TestEventRuleWatchingIsContained(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, eventRuleBase+`
- {classname: _permission, keyname: p_secret_read}
- {classname: _schema, keyname: vault, p_read: p_secret_read}
`, store.LoadOptions{})
	// A webhook rule: a pipeline rule would also need its pipeline to be runnable.
	doc := func(schema string) string {
		return "schemas: [" + schema + `], webhook_url: "https://r.example/h", secret: s3cret`
	}
	admin := userAuth("p_event_admin", "p_data_read")
	probs := ruleProblems(t, db, admin, doc("_apikey"))
	if len(probs) != 1 || probs[0].Field != "schemas" || probs[0].Message != "schemas: watching _apikey needs p_apikey_admin, which the writer does not hold" {
		t.Fatalf("watching _apikey with p_event_admin alone: %+v", probs)
	}
	absent(t, db, "_eventrule", "r1")
	probs = ruleProblems(t, db, admin, doc("vault"))
	if len(probs) != 1 || probs[0].Message != "schemas: watching vault needs p_secret_read (reading it), which the writer does not hold" {
		t.Fatalf("watching an unreadable schema: %+v", probs)
	}
	if probs := ruleProblems(t, db, userAuth("p_event_admin", "p_apikey_admin"), doc("_apikey")); probs != nil {
		t.Fatalf("watching _apikey with p_apikey_admin: %+v", probs)
	}
	if got := instance(t, db, "_eventrule", "r1").Data[store.AuthorField]; got != "user:tester" {
		t.Fatalf("author = %v, want user:tester", got)
	}
	// Without p_event_admin no rule is written at all.
	r := load(t, db, "- {classname: _eventrule, keyname: r2, schemas: [server], pipeline: tidy}", store.LoadOptions{Auth: userAuth("p_data_read")})
	if r.Errors != 1 || !strings.Contains(messages(r), "p_event_admin") {
		t.Fatalf("rule without p_event_admin: %s", messages(r))
	}
}

// TestEncryptedSecret: an event rule's secret is stored sealed (not the plain text,
// not a hash), opens back to the plain text with the database's key, is kept when an
// update leaves it out, and appears in no revision, export or instance document.
func TestEncryptedSecret(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := t.Context()
	mustLoad(t, db, eventRuleBase, store.LoadOptions{})
	const plain = "whsec-plain-text-42"
	mustLoad(t, db, `- {classname: _eventrule, keyname: hook, schemas: [server], webhook_url: "https://r.example/h", secret: `+plain+`}`, store.LoadOptions{})
	stored := queryString(t, db, "SELECT data ->> 'secret' FROM instances WHERE classname = '_eventrule' AND keyname = 'hook'")
	if !strings.HasPrefix(stored, model.SealedPrefix) || strings.Contains(stored, plain) || model.IsSecretHash(stored) {
		t.Fatalf("stored secret = %q, want it sealed (%s...)", stored, model.SealedPrefix)
	}
	target, err := db.EventRuleTarget(ctx, "hook")
	if err != nil {
		t.Fatal(err)
	}
	if string(target.Secret) != plain || target.URL != "https://r.example/h" || !target.Enabled || target.Author != "system" {
		t.Fatalf("target = %+v (secret %q)", target, target.Secret)
	}
	// Two sealings of one secret differ (a random nonce).
	mustLoad(t, db, `- {classname: _eventrule, keyname: hook2, schemas: [server], webhook_url: "https://r.example/h", secret: `+plain+`}`, store.LoadOptions{})
	if other := queryString(t, db, "SELECT data ->> 'secret' FROM instances WHERE keyname = 'hook2'"); other == stored {
		t.Fatal("two sealings of one secret are the same text")
	}
	// The same secret again changes nothing (the caller holds every permission); an
	// update without it keeps it.
	r := mustLoad(t, db, `- {classname: _eventrule, keyname: hook, secret: `+plain+`}`, store.LoadOptions{})
	if r.Unchanged != 1 {
		t.Fatalf("the same secret again: %s", counts(r))
	}
	mustLoad(t, db, `- {classname: _eventrule, keyname: hook, description: changed}`, store.LoadOptions{})
	if got := queryString(t, db, "SELECT data ->> 'secret' FROM instances WHERE keyname = 'hook'"); got != stored {
		t.Fatalf("an update without the secret changed it")
	}
	mustLoad(t, db, `- {classname: _eventrule, keyname: hook, secret: another-secret-value}`, store.LoadOptions{})
	if target, err = db.EventRuleTarget(ctx, "hook"); err != nil || string(target.Secret) != "another-secret-value" {
		t.Fatalf("after a new secret: %v %q", err, target.Secret)
	}
	// Nowhere to be read: revisions, the export, the instance document.
	if n := queryInt(t, db, "SELECT COUNT(*) FROM revisions WHERE classname = '_eventrule'"); n < 3 {
		t.Fatalf("%d revisions of event rules, want at least 3", n)
	}
	for _, needle := range []string{plain, "another-secret-value", model.SealedPrefix} {
		if n := queryInt(t, db, "SELECT COUNT(*) FROM revisions WHERE before LIKE ? OR after LIKE ?", "%"+needle+"%", "%"+needle+"%"); n != 0 {
			t.Fatalf("%d revisions hold %q", n, needle)
		}
	}
	var out bytes.Buffer
	if err := db.Export(ctx, &out, []string{"_eventrule"}, "yaml"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "hook") || strings.Contains(out.String(), "secret") || strings.Contains(out.String(), model.SealedPrefix) {
		t.Fatalf("export:\n%s", out.String())
	}
	s, _ := db.Schema(ctx, "_eventrule")
	doc := model.MustJSON(db.InstanceDoc(ctx, s, instance(t, db, "_eventrule", "hook")).Vals)
	if strings.Contains(doc, "secret") || strings.Contains(doc, model.SealedPrefix) {
		t.Fatalf("instance document: %s", doc)
	}
	// A sealed value given as is must open with this key.
	r = load(t, db, `- {classname: _eventrule, keyname: hook, secret: "enc:v1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`, store.LoadOptions{})
	if r.Errors != 1 || !strings.Contains(messages(r), "field secret: the sealed value given (enc:v1:...) cannot be used") {
		t.Fatalf("a foreign sealed value: %s", messages(r))
	}
}

// TestEncryptedSecretInUserSchema: a user schema may hold encrypted secrets; the
// dataformat_ext of a secret field is empty or encrypted, and never changes.
func TestEncryptedSecretInUserSchema(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: svc, token: {dataformat: secret, dataformat_ext: encrypted}, pw: {dataformat: secret}}
- {classname: svc, keyname: a, token: tok-123, pw: pw-123}
`, store.LoadOptions{})
	in := instance(t, db, "svc", "a")
	if tok, _ := in.Data["token"].(string); !strings.HasPrefix(tok, model.SealedPrefix) {
		t.Fatalf("token stored as %q", tok)
	}
	if pw, _ := in.Data["pw"].(string); !model.IsSecretHash(pw) {
		t.Fatalf("pw stored as %q, want a hash", pw)
	}
	for doc, want := range map[string]string{
		`- {classname: _schema, keyname: svc, token: {dataformat: secret, dataformat_ext: ""}}`:          "cannot change its dataformat_ext",
		`- {classname: _schema, keyname: svc, pw: {dataformat: secret, dataformat_ext: encrypted}}`:      "cannot change its dataformat_ext",
		`- {classname: _schema, keyname: svc2, k: {dataformat: secret, dataformat_ext: rot13}}`:          `a secret's dataformat_ext is empty (hashed) or encrypted, not "rot13"`,
		"- {classname: svc, keyname: b, token: " + strings.Repeat("x", model.MaxEncryptedSecret+1) + "}": "an encrypted secret holds at most 1024 bytes",
	} {
		r := load(t, db, doc, store.LoadOptions{})
		if r.Errors != 1 || !strings.Contains(messages(r), want) {
			t.Errorf("%.60s: %s, want %q", doc, messages(r), want)
		}
	}
}

// TestAuthOf: an author and its recorded id give back the permissions its principal
// holds now; a principal gone, disabled or expired is refused, and so is one that
// only shares the name (the id differs) or an author recorded without its id.
func TestAuthOf(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `
- {classname: _user, keyname: ann}
- {classname: _role, keyname: ops, permissions: [p_event_admin], users: [ann]}
- {classname: _user, keyname: bob, is_enabled: false}
- {classname: _apikey, keyname: k1, permissions: [p_data_read]}
- {classname: _apikey, keyname: k2, permissions: [p_data_read], is_enabled: false}
- {classname: _apikey, keyname: k3, permissions: [p_data_read], expires: "2000-01-01"}
`, store.LoadOptions{})
	id := func(cls, key string) int64 {
		in, err := db.Instance(ctx, cls, key)
		if err != nil {
			t.Fatal(err)
		}
		return in.ID
	}
	ann, bob, k1, k2, k3 := id("_user", "ann"), id("_user", "bob"), id("_apikey", "k1"), id("_apikey", "k2"), id("_apikey", "k3")
	a, err := db.AuthOf(ctx, "system", 0)
	if err != nil || !a.HasAll() {
		t.Fatalf("system: %+v %v", a, err)
	}
	if a, err = db.AuthOf(ctx, "user:ann", ann); err != nil || a.Author() != "user:ann" || !a.Has("p_event_admin") || a.Has("p_data_read") {
		t.Fatalf("user:ann: %+v %v", a, err)
	}
	if a, err = db.AuthOf(ctx, "apikey:k1", k1); err != nil || a.Author() != "apikey:k1" || !a.Has("p_data_read") {
		t.Fatalf("apikey:k1: %+v %v", a, err)
	}
	type author struct {
		name string
		id   int64
	}
	for au, want := range map[author]string{
		{"user:bob", bob}:     "user bob is disabled",
		{"user:zed", 999999}:  "user zed no longer exists",
		{"user:ann", 0}:       `author "user:ann" has no recorded identity (author_id)`,
		{"apikey:k1", 0}:      `author "apikey:k1" has no recorded identity (author_id)`,
		{"apikey:k1", k2}:     "API key k1 is no longer valid", // k2's id: another key
		{"apikey:k2", k2}:     "API key k2 is no longer valid",
		{"apikey:k3", k3}:     "API key k3 is no longer valid",
		{"apikey:k9", 999999}: "API key k9 is no longer valid",
		{"task:h", 1}:         `author "task:h" is not system, user:LOGIN or apikey:NAME`,
		{"user:", 1}:          `author "user:" is not`,
		{"somebody", 1}:       `author "somebody" is not`,
		{"", 0}:               `author "" is not`,
	} {
		if a, err := db.AuthOf(ctx, au.name, au.id); err == nil || !strings.Contains(store.ErrorMessage(err), want) {
			t.Errorf("AuthOf(%q, %d) = %+v, %v; want an error containing %q", au.name, au.id, a, err, want)
		}
	}
	// The login deleted and created again is another user: the old id finds nobody.
	mustLoad(t, db, "- {classname: _user, keyname: ann, _action: delete}\n- {classname: _user, keyname: ann}\n", store.LoadOptions{})
	if a, err := db.AuthOf(ctx, "user:ann", ann); err == nil || !strings.Contains(store.ErrorMessage(err), "user ann no longer exists") {
		t.Errorf("AuthOf(user:ann, old id) after the login was made again = %+v, %v", a, err)
	}
	if a, err := db.AuthOf(ctx, "user:ann", id("_user", "ann")); err != nil || a.Author() != "user:ann" {
		t.Errorf("AuthOf(user:ann, new id) = %+v, %v", a, err)
	}
}

// TestSecretKeyRefusals: a key file group or others may read is refused, so is one
// that does not hold 64 hex digits; on PostgreSQL, with no key set, a write that needs
// one fails naming the setting, while on SQLite the default key file is created
// beside the database, mode 0600.
func TestSecretKeyRefusals(t *testing.T) {
	t.Parallel()
	addr := testkit.MigratedFile(t)
	dir := t.TempDir()
	write := func(t *testing.T, opts store.Options) error {
		t.Helper()
		db, err := testkit.OpenStore(t, addr, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		r := load(t, db, `
- {classname: _schema, keyname: svc, token: {dataformat: secret, dataformat_ext: encrypted}}
- {classname: svc, keyname: a, token: tok-123}
`, store.LoadOptions{})
		if r.Errors == 0 {
			return nil
		}
		absent(t, db, "svc", "a")
		return model.Errorf(model.EInvalid, "%s", messages(r))
	}
	keyFile := func(name, content string, mode uint32) string {
		p := filepath.Join(dir, name)
		if err := writeFileMode(p, content, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hex64 := strings.Repeat("ab", 32)
	t.Run("group readable", func(t *testing.T) {
		err := write(t, store.Options{SecretKeyFile: keyFile("open.key", hex64, 0o640)})
		if err == nil || !strings.Contains(err.Error(), "has mode 0640: group and others must have no access") ||
			!strings.Contains(err.Error(), store.SecretKeySetting) {
			t.Fatalf("a group-readable key file: %v", err)
		}
	})
	t.Run("not 32 bytes", func(t *testing.T) {
		err := write(t, store.Options{SecretKeyFile: keyFile("short.key", "abcd", 0o600)})
		if err == nil || !strings.Contains(err.Error(), "must hold 64 hex digits (32 bytes)") {
			t.Fatalf("a short key file: %v", err)
		}
		if err := store.CheckSecretKeyFile(filepath.Join(dir, "short.key")); err == nil {
			t.Fatal("CheckSecretKeyFile accepted a short key")
		}
	})
	t.Run("a symbolic link", func(t *testing.T) {
		// To a good key file: whoever may change the link could swap the key.
		link := filepath.Join(dir, "link.key")
		if err := os.Symlink(keyFile("target.key", hex64, 0o600), link); err != nil {
			t.Fatal(err)
		}
		err := write(t, store.Options{SecretKeyFile: link})
		if err == nil || !strings.Contains(err.Error(), "is a symbolic link: name the file itself") ||
			!strings.Contains(err.Error(), store.SecretKeySetting) {
			t.Fatalf("a key file that is a link: %v", err)
		}
		if err := store.CheckSecretKeyFile(link); err == nil {
			t.Fatal("CheckSecretKeyFile accepted a link")
		}
	})
	t.Run("not a regular file", func(t *testing.T) {
		// A FIFO: refused at once, without waiting for a writer.
		fifo := filepath.Join(dir, "fifo.key")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := store.CheckSecretKeyFile(fifo); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
			t.Fatalf("a FIFO: %v", err)
		}
	})
	t.Run("owned by another user", func(t *testing.T) {
		p := keyFile("theirs.key", hex64, 0o600)
		other := os.Geteuid() + 4242
		if err := os.Chown(p, other, -1); err != nil {
			// Only root may give a file away: as another user no such file can be made.
			t.Skipf("cannot make a file another user owns (not root): %v", err)
		}
		err := write(t, store.Options{SecretKeyFile: p})
		want := fmt.Sprintf("is owned by uid %d, not by the service's user (uid %d) or root", other, os.Geteuid())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a key file of another user: %v, want %q", err, want)
		}
	})
	// Last: it creates the instance the others must leave absent.
	t.Run("a good key file", func(t *testing.T) {
		if err := write(t, store.Options{SecretKeyFile: keyFile("good.key", hex64+"\n", 0o600)}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSecretKeyDefault: with no key set, SQLite makes the key file beside the database
// (mode 0600) at the first write that needs it; PostgreSQL has no default, and such a
// write fails naming the setting.
func TestSecretKeyDefault(t *testing.T) {
	t.Parallel()
	addr := testkit.MigratedFile(t)
	db, err := testkit.OpenStore(t, addr, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const doc = `
- {classname: _schema, keyname: svc, token: {dataformat: secret, dataformat_ext: encrypted}}
- {classname: svc, keyname: a, token: tok-123}
`
	// A dry run says what the write would do, and makes no key file.
	dry := load(t, db, doc, store.LoadOptions{DryRun: true})
	if _, err := os.Stat(addr + ".key"); !testkit.Postgres() && (dry.Errors != 0 || !os.IsNotExist(err)) {
		t.Fatalf("dry run: %s; key file: %v", messages(dry), err)
	}
	if testkit.Postgres() && (dry.Errors != 1 || !strings.Contains(messages(dry), "SERVICE_SECRET_KEY_FILE is not set")) {
		t.Fatalf("dry run on PostgreSQL without a key: %s", messages(dry))
	}
	r := load(t, db, doc, store.LoadOptions{})
	if testkit.Postgres() {
		if r.Errors != 1 || !strings.Contains(messages(r), "field token: encrypted secrets need a key: SERVICE_SECRET_KEY_FILE is not set") {
			t.Fatalf("PostgreSQL without a key: %s", messages(r))
		}
		absent(t, db, "svc", "a")
		return
	}
	if r.Errors != 0 {
		t.Fatalf("SQLite with the default key: %s", messages(r))
	}
	mode, err := fileMode(addr + ".key")
	if err != nil || mode != 0o600 {
		t.Fatalf("default key file: mode %04o, %v", mode, err)
	}
	if err := store.CheckSecretKeyFile(addr + ".key"); err != nil {
		t.Fatalf("the key file made is refused: %v", err)
	}
}

// writeFileMode writes content to a new file at path with exactly mode (whatever the
// umask).
func writeFileMode(path, content string, mode uint32) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, os.FileMode(mode))
}

// fileMode is the permission bits of the file at path.
func fileMode(path string) (uint32, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return uint32(st.Mode().Perm()), nil
}

// TestEncryptedSecretWithAnotherKey: a database opened with another key (a backup
// restored without its key file) keeps its rules, but their secrets do not open: the
// error says so and how to mend it, and quotes no secret.
func TestEncryptedSecretWithAnotherKey(t *testing.T) {
	t.Parallel()
	addr := testkit.MigratedFile(t)
	db := testkit.Open(t, addr, testkit.Options{})
	mustLoad(t, db, eventRuleBase+`
- {classname: _eventrule, keyname: hook, schemas: [server], webhook_url: "https://r.example/h", secret: the-plain-secret}
`, store.LoadOptions{})
	other, err := testkit.OpenStore(t, addr, store.Options{SecretKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.EventRuleTarget(t.Context(), "hook")
	msg := store.ErrorMessage(err)
	if !strings.Contains(msg, "event rule hook: encrypted secret: it does not open with this key (sealed with another key, or altered); set the secret again") ||
		strings.Contains(msg, "the-plain-secret") || strings.Contains(msg, model.SealedPrefix) {
		t.Fatalf("target under another key: %v", err)
	}
	if _, err := other.EventRuleTarget(t.Context(), "nope"); store.ErrorCode(err) != model.ENotFound {
		t.Fatalf("target of no rule: %v, want not found", err)
	}
	if _, err := store.Open(t.Context(), addr, store.Options{SecretKey: []byte("short")}); err == nil || !strings.Contains(err.Error(), "secret key: 5 bytes, not 32") {
		t.Fatalf("a short key given: %v", err)
	}
}

// TestEventRuleNewURLNeedsNewSecret: an update that sends a rule's webhook to another
// address must give a new secret (else another event admin could collect signatures
// made with the owner's secret): refused naming both fields, nothing changed; with a
// new secret it is written; other changes keep the stored secret.
func TestEventRuleNewURLNeedsNewSecret(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, eventRuleBase, store.LoadOptions{})
	mustLoad(t, db, `- {classname: _eventrule, keyname: hook, schemas: [server], webhook_url: "https://r.example/h", secret: first-secret}`, store.LoadOptions{})
	sealed := instance(t, db, "_eventrule", "hook").Data["secret"]
	r := load(t, db, `- {classname: _eventrule, keyname: hook, schemas: [server], webhook_url: "https://evil.example/h"}`, store.LoadOptions{})
	if want := "secret: changing webhook_url needs a new secret"; r.Errors != 1 || !strings.Contains(messages(r), want) {
		t.Fatalf("a new URL without a secret: %s, want %q", messages(r), want)
	}
	if in := instance(t, db, "_eventrule", "hook"); in.Data["webhook_url"] != "https://r.example/h" || in.Data["secret"] != sealed {
		t.Fatalf("after a refused update: %v", in.Data["webhook_url"])
	}
	// The stored sealed text given back is not a new secret either.
	r = load(t, db, `- {classname: _eventrule, keyname: hook, schemas: [server], webhook_url: "https://evil.example/h", secret: "`+sealed.(string)+`"}`, store.LoadOptions{})
	if r.Errors != 1 || !strings.Contains(messages(r), "changing webhook_url needs a new secret") {
		t.Fatalf("a new URL with the stored sealed secret: %s", messages(r))
	}
	mustLoad(t, db, `- {classname: _eventrule, keyname: hook, schemas: [server], description: d, webhook_url: "https://r.example/h"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: _eventrule, keyname: hook, schemas: [server], webhook_url: "https://new.example/h", secret: second-secret}`, store.LoadOptions{})
	target, err := db.EventRuleTarget(t.Context(), "hook")
	if err != nil || target.URL != "https://new.example/h" || string(target.Secret) != "second-secret" {
		t.Fatalf("after the update with a new secret: %v %v", target, err)
	}
}

// TestAuthorIDIsTheWriters: Apply records the writer's name and instance id on an
// authored class, whatever the entry says; the system's id is 0.
func TestAuthorIDIsTheWriters(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, eventRuleBase, store.LoadOptions{})
	a := userAuth("p_event_admin", "p_data_read")
	a.UserID = 4242
	mustLoad(t, db, `- {classname: _eventrule, keyname: r1, schemas: [server], webhook_url: "https://r.example/h", secret: s, author: system, author_id: 1}`,
		store.LoadOptions{Auth: a})
	target, err := db.EventRuleTarget(t.Context(), "r1")
	if err != nil || target.Author != "user:tester" || target.AuthorID != 4242 {
		t.Fatalf("author %q id %d (%v), want user:tester 4242", target.Author, target.AuthorID, err)
	}
	mustLoad(t, db, `- {classname: _eventrule, keyname: r1, _action: disable}`, store.LoadOptions{})
	if target, err = db.EventRuleTarget(t.Context(), "r1"); err != nil || target.Author != "system" || target.AuthorID != 0 {
		t.Fatalf("after the system's disable: author %q id %d (%v), want system 0", target.Author, target.AuthorID, err)
	}
}

// TestSealedSecretOfAnotherInstanceRefused: a sealed secret is kept as is only when
// it is the value the instance's own field holds (a load that gives it again changes
// nothing); the sealed text of another rule's secret (from a backup or a copy of the
// database, which holds it) is refused, so no rule signs with a secret its writer
// never knew.
func TestSealedSecretOfAnotherInstanceRefused(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, eventRuleBase, store.LoadOptions{})
	mustLoad(t, db, `
- {classname: _eventrule, keyname: alice, schemas: [server], webhook_url: "https://alice.example/", secret: alice-only-secret}
- {classname: _eventrule, keyname: bob, schemas: [server], webhook_url: "https://bob.example/", secret: bob-secret}
`, store.LoadOptions{})
	ctx := context.Background()
	sealed := func(key string) string {
		v, _ := instance(t, db, "_eventrule", key).Data["secret"].(string)
		if !strings.HasPrefix(v, model.SealedPrefix) {
			t.Fatalf("%s's secret stored as %q", key, v)
		}
		return v
	}
	alice, bob := sealed("alice"), sealed("bob")
	const refused = "field secret: the sealed value given (enc:v1:...) cannot be used: a field keeps only its own sealed value as is"
	for _, doc := range []string{
		`- {classname: _eventrule, keyname: mallory, schemas: [server], webhook_url: "https://mallory.example/", secret: "` + alice + `"}`,
		`- {classname: _eventrule, keyname: bob, secret: "` + alice + `"}`,
	} {
		r := load(t, db, doc, store.LoadOptions{})
		if r.Errors != 1 || !strings.Contains(messages(r), refused) || strings.Contains(messages(r), alice[len(model.SealedPrefix):]) {
			t.Fatalf("%s: %s, want refused", doc, messages(r))
		}
	}
	if _, err := db.Instance(ctx, "_eventrule", "mallory"); !store.IsNotFound(err) {
		t.Fatalf("mallory's rule: %v, want none", err)
	}
	if sealed("bob") != bob {
		t.Fatal("bob's secret changed")
	}
	// Its own sealed value again: nothing changes.
	r := load(t, db, `- {classname: _eventrule, keyname: alice, secret: "`+alice+`"}`, store.LoadOptions{})
	if r.Errors != 0 || r.Unchanged != 1 || sealed("alice") != alice {
		t.Fatalf("alice's own sealed value: %s %s", counts(r), messages(r))
	}
	tg, err := db.EventRuleTarget(ctx, "bob")
	if err != nil || string(tg.Secret) != "bob-secret" {
		t.Fatalf("bob's target: %v", err)
	}
}

// TestReloadKeepsTheAuthor: loading a rule's or a schedule's content again (an
// export re-loaded, a configuration file synchronised) changes nothing: it is
// unchanged, and its author stays who wrote it, whoever loads it (the CLI loads as
// system, which holds every permission). A load that changes something makes the
// loader the author.
func TestReloadKeepsTheAuthor(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, eventRuleBase, store.LoadOptions{})
	a := userAuth("p_event_admin", "p_pipeline_admin", "p_pipeline_run", "p_data_read", "p_data_update")
	a.UserID = 4242
	const rule = `- {classname: _eventrule, keyname: r1, schemas: [server], pipeline: tidy, description: d}
- {classname: _schedule, keyname: s1, pipeline: tidy, schemas: [server], cron: "@hourly", description: d}
`
	mustLoad(t, db, rule, store.LoadOptions{Auth: a})
	author := func(cls string) string {
		d := instance(t, db, cls, map[string]string{"_eventrule": "r1", "_schedule": "s1"}[cls]).Data
		return fmt.Sprint(d["author"], " ", d["author_id"])
	}
	for _, doc := range []string{rule,
		// as an export writes it: the author fields included
		strings.ReplaceAll(rule, "description: d}", "description: d, author: user:tester, author_id: 4242}")} {
		r := load(t, db, doc, store.LoadOptions{})
		if r.Errors != 0 || r.Unchanged != 2 || r.Updated != 0 {
			t.Fatalf("the same content loaded again by the system: %+v, want 2 unchanged", r)
		}
		for _, cls := range []string{"_eventrule", "_schedule"} {
			if got := author(cls); got != "user:tester 4242" {
				t.Fatalf("%s author after a load of the same content: %q, want user:tester 4242", cls, got)
			}
		}
	}
	r := load(t, db, strings.ReplaceAll(rule, "description: d}", "description: changed}"), store.LoadOptions{})
	if r.Errors != 0 || r.Updated != 2 {
		t.Fatalf("a changed description: %+v, want 2 updated", r)
	}
	for _, cls := range []string{"_eventrule", "_schedule"} {
		if got := author(cls); got != "system 0" {
			t.Fatalf("%s author after the system changed it: %q, want system 0", cls, got)
		}
	}
}

// TestDisabledRuleNamesGonePipeline: a rule or a schedule whose pipeline was deleted
// can still be disabled and edited while disabled (what it names is checked only
// while it is enabled), and enabling it again, by an update or by _action: enable, is
// refused while the pipeline is gone. Enabling also checks the enabler could run the
// pipeline.
func TestDisabledRuleNamesGonePipeline(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, eventRuleBase+`
- {classname: _eventrule, keyname: r1, schemas: [server], pipeline: tidy}
- {classname: _schedule, keyname: s1, pipeline: tidy, schemas: [server], cron: "@hourly"}
`, store.LoadOptions{})
	mustLoad(t, db, "- {classname: _pipeline, keyname: tidy, _action: delete}\n", store.LoadOptions{})
	for _, doc := range []string{
		"- {classname: _eventrule, keyname: r1, is_enabled: false}\n- {classname: _schedule, keyname: s1, is_enabled: false}\n",
		"- {classname: _eventrule, keyname: r1, is_enabled: false, description: off}\n- {classname: _schedule, keyname: s1, is_enabled: false, description: off}\n",
	} {
		if r := load(t, db, doc, store.LoadOptions{Action: model.ActionUpdate}); r.Errors != 0 || r.Updated != 2 {
			t.Fatalf("disabling or editing a disabled rule and schedule naming a deleted pipeline: %+v", r)
		}
	}
	for _, doc := range []string{
		"- {classname: _eventrule, keyname: r1, _action: enable}\n- {classname: _schedule, keyname: s1, _action: enable}\n",
		"- {classname: _eventrule, keyname: r1, is_enabled: true}\n- {classname: _schedule, keyname: s1, is_enabled: true}\n",
	} {
		r := load(t, db, doc, store.LoadOptions{})
		if r.Errors != 2 {
			t.Fatalf("enabling a rule and a schedule whose pipeline is gone: %+v, want 2 errors", r)
		}
		for _, m := range r.Messages {
			if !strings.Contains(m.Message, "pipeline") {
				t.Fatalf("refusal %q does not name the pipeline", m.Message)
			}
		}
	}
	mustLoad(t, db, `- {classname: _pipeline, keyname: tidy, content: "- field_lower: env"}`, store.LoadOptions{})
	weak := userAuth("p_event_admin", "p_pipeline_admin", "p_data_read")
	r := load(t, db, "- {classname: _eventrule, keyname: r1, _action: enable}\n- {classname: _schedule, keyname: s1, _action: enable}\n",
		store.LoadOptions{Auth: weak})
	if r.Errors != 2 || !strings.Contains(r.Messages[0].Message, "p_pipeline_run") {
		t.Fatalf("enabling by a writer without p_pipeline_run: %+v, want 2 refusals naming p_pipeline_run", r)
	}
	if r := load(t, db, "- {classname: _eventrule, keyname: r1, _action: enable}\n- {classname: _schedule, keyname: s1, _action: enable}\n",
		store.LoadOptions{}); r.Errors != 0 || r.Enabled != 2 {
		t.Fatalf("enabling once the pipeline is back: %+v", r)
	}
}
