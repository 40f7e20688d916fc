package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"dataservice/store"
	"dataservice/store/model"
)

func setupAPIKeyCreate(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	perms := fs.String("permissions", "", "comma-separated permissions (!p removes, role:NAME adds a role's)")
	readonly := fs.Bool("readonly", false, "the key cannot change anything")
	user := fs.String("user", "", "login the key acts for")
	expires := fs.String("expires", "", "last valid day, YYYY-MM-DD")
	return func(ctx context.Context, args []string) error {
		return c.apikeyCreate(ctx, args[0], splitList(*perms), *readonly, *user, *expires)
	}
}

func setupAPIKeyList(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return reading(c, func(ctx context.Context, db *store.DB) error {
		return c.apikeyList(ctx, db)
	})
}

func setupAPIKeyRevoke(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return func(ctx context.Context, args []string) error {
		db, _, _, err := c.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.Instance(ctx, "_apikey", args[0]); err != nil {
			return fmt.Errorf("API key %q not found", args[0])
		}
		return c.loadOne(ctx, db, map[string]any{"classname": "_apikey", "keyname": args[0], "_action": string(model.ActionDelete)},
			"revoked")
	}
}

// checkPermissionNames refuses unknown permission names (suggesting the closest) and
// unknown roles in role:NAME entries.
func checkPermissionNames(ctx context.Context, db *store.DB, list []string) error {
	known, err := db.Permissions(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(known))
	set := map[string]bool{}
	for i, p := range known {
		names[i] = p.Keyname
		set[p.Keyname] = true
	}
	for _, item := range list {
		name := strings.TrimPrefix(item, "!")
		if role, ok := strings.CutPrefix(name, "role:"); ok {
			if _, err := db.Instance(ctx, "_role", role); err != nil {
				return fmt.Errorf("unknown role %q in %q", role, item)
			}
			continue
		}
		if set[name] {
			continue
		}
		msg := fmt.Sprintf("unknown permission %q", name)
		if best := closest(name, names); best != "" {
			msg += fmt.Sprintf("; did you mean %q?", best)
		}
		return fmt.Errorf("%s (\"dataservice permission list\" shows them all)", msg)
	}
	return nil
}

func (c *cli) apikeyCreate(ctx context.Context, key string, perms []string, readonly bool, user, expires string) error {
	db, _, _, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Instance(ctx, "_apikey", key); err == nil {
		return fmt.Errorf("API key %q already exists", key)
	}
	if err := checkPermissionNames(ctx, db, perms); err != nil {
		return err
	}
	secret := newSecret()
	entry := map[string]any{"classname": "_apikey", "keyname": key, "secret": secret, "is_readonly": readonly,
		"_action": string(model.ActionInit)}
	if len(perms) > 0 {
		items := make([]any, len(perms))
		for i, p := range perms {
			items[i] = p
		}
		entry["permissions"] = items
	}
	if user != "" {
		if _, err := db.Instance(ctx, "_user", user); err != nil {
			return fmt.Errorf("user %q not found", user)
		}
		entry["user"] = user
	}
	if expires != "" {
		entry["expires"] = expires
	}
	if err := c.loadOne(ctx, db, entry, ""); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s:%s\n", key, secret)
	fmt.Fprintln(c.stderr, "store this secret now: it is shown only once")
	if len(perms) == 0 {
		fmt.Fprintln(c.stderr, "warning: the key has no permissions: it authenticates but every gated request is "+
			"denied (give --permissions; see docs/users.md for ready-made sets)")
	}
	return nil
}

// loadOne loads a single entry with every permission and reports its error.
func (c *cli) loadOne(ctx context.Context, db *store.DB, m map[string]any, done string) error {
	res, err := db.Load(ctx, []*model.Entry{model.NewEntry(m)}, store.LoadOptions{})
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%s", res.Messages[0].Message)
	}
	if done != "" {
		fmt.Fprintf(c.stdout, "%s %s\n", m["keyname"], done)
	}
	return nil
}

func (c *cli) apikeyList(ctx context.Context, db *store.DB) error {
	return db.EachInstance(ctx, "_apikey", func(in *store.Instance) error {
		state := "enabled"
		if !in.IsEnabled {
			state = "disabled"
		}
		ro := "read-write"
		if b, _ := in.Data["is_readonly"].(bool); b {
			ro = "read-only"
		}
		secret := "secret set"
		if s, _ := in.Data["secret"].(string); s == "" {
			secret = "no secret"
		}
		perms := fmt.Sprint(in.Data["permissions"])
		if in.Data["permissions"] == nil {
			perms = "[]"
		}
		fmt.Fprintf(c.stdout, "%s\t%s\t%s\t%s\tuser=%v\texpires=%v\tpermissions=%s\n", in.Keyname, state, ro,
			secret, orDash(in.Data["user"]), orDash(in.Data["expires"]), perms)
		return nil
	})
}

func orDash(v any) any {
	if v == nil {
		return "-"
	}
	return v
}

// newSecret returns 32 random bytes, base64url.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
