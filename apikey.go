package main

import (
	"context"
	"fmt"
	"strings"

	"dataservice/store"
)

// apikey runs "apikey create|list|revoke".
func (c *cli) apikey(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("usage: dataservice apikey create|list|revoke ...")
	}
	sub, args := args[0], args[1:]
	var f settingFlags
	fs := c.flags("apikey "+sub, &f)
	var perms, user, expires *string
	var readonly *bool
	if sub == "create" {
		perms = fs.String("permissions", "", "comma-separated permissions (!p removes, role:NAME adds a role's)")
		readonly = fs.Bool("readonly", false, "the key cannot change anything")
		user = fs.String("user", "", "login the key acts for")
		expires = fs.String("expires", "", "last valid day, YYYY-MM-DD")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch sub {
	case "create", "revoke":
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: dataservice apikey %s KEYNAME", sub)
		}
	case "list":
		if fs.NArg() != 0 {
			return fmt.Errorf("usage: dataservice apikey list")
		}
	default:
		return fmt.Errorf("unknown apikey command %q (create, list, revoke)", sub)
	}
	db, _, _, err := c.open(ctx, &f, false)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "list":
		return c.apikeyList(ctx, db)
	case "revoke":
		return c.loadOne(ctx, db, map[string]any{"classname": "_apikey", "keyname": fs.Arg(0), "_action": "delete"},
			"revoked")
	}
	key := fs.Arg(0)
	if _, err := db.Instance(ctx, "_apikey", key); err == nil {
		return fmt.Errorf("API key %q already exists", key)
	}
	secret := newSecret()
	entry := map[string]any{"classname": "_apikey", "keyname": key, "secret": secret, "is_readonly": *readonly,
		"_action": "init"}
	if l := splitList(*perms); len(l) > 0 {
		items := make([]any, len(l))
		for i, p := range l {
			items[i] = p
		}
		entry["permissions"] = items
	}
	if *user != "" {
		if _, err := db.Instance(ctx, "_user", *user); err != nil {
			return fmt.Errorf("user %q not found", *user)
		}
		entry["user"] = *user
	}
	if *expires != "" {
		entry["expires"] = *expires
	}
	if err := c.loadOne(ctx, db, entry, ""); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s:%s\n", key, secret)
	fmt.Fprintln(c.stderr, "store this secret now: it is shown only once")
	return nil
}

// loadOne loads a single entry with every permission and reports its error.
func (c *cli) loadOne(ctx context.Context, db *store.DB, m map[string]any, done string) error {
	res, err := db.Load(ctx, []*store.Entry{store.NewEntry(m)}, store.LoadOptions{})
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%s", res.Messages[0].Message)
	}
	if done != "" {
		if res.Deleted == 0 {
			return fmt.Errorf("API key %q not found", m["keyname"])
		}
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
