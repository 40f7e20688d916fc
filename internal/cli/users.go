package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"dataservice/store"
	"dataservice/store/model"
)

// readPassword reads the first line of file ("-": stdin) as a password.
func (c *cli) readPassword(file, login string) (string, error) {
	var r io.Reader = c.stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("password file: %w", err)
		}
		defer f.Close()
		r = f
	} else if f, ok := c.stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintf(c.stderr, "password for %s (the terminal shows it; pipe it in to hide it): ", login)
		}
	}
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read password: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", fmt.Errorf("empty password (the first line of %s is the password)", map[bool]string{true: "stdin", false: file}[file == "-"])
	}
	return pw, nil
}

func setupUserAdd(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	email := fs.String("email", "", "email address")
	first := fs.String("firstname", "", "first name")
	last := fs.String("lastname", "", "last name")
	pwFile := fs.String("password-file", "-", "read the password from the first line of this file (- is stdin)")
	noPw := fs.Bool("no-password", false, "create the account without a password (it cannot log in with Basic auth)")
	disabled := fs.Bool("disabled", false, "create the account disabled")
	return func(ctx context.Context, args []string) error {
		login := args[0]
		entry := map[string]any{"classname": "_user", "keyname": login, "is_enabled": !*disabled, "_action": string(model.ActionInit)}
		for k, v := range map[string]string{"email": *email, "firstname": *first, "lastname": *last} {
			if v != "" {
				entry[k] = v
			}
		}
		if !*noPw {
			pw, err := c.readPassword(*pwFile, login)
			if err != nil {
				return err
			}
			entry["password"] = pw
		}
		db, _, _, err := c.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.Instance(ctx, "_user", login); err == nil {
			return fmt.Errorf("user %q already exists (\"dataservice user passwd %s\" sets its password)", login, login)
		}
		if err := c.loadOne(ctx, db, entry, ""); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "user %s created\n", login)
		fmt.Fprintln(c.stderr, "the account has no permissions until a role lists it (docs/users.md)")
		return nil
	}
}

func setupUserPasswd(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	pwFile := fs.String("password-file", "-", "read the password from the first line of this file (- is stdin)")
	return func(ctx context.Context, args []string) error {
		login := args[0]
		if login == "admin" {
			return fmt.Errorf("the admin password is set from SERVICE_ADMIN_PASSWORD at every start of serve or migrate: change that setting")
		}
		pw, err := c.readPassword(*pwFile, login)
		if err != nil {
			return err
		}
		db, _, _, err := c.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.Instance(ctx, "_user", login); err != nil {
			return fmt.Errorf("user %q not found", login)
		}
		if err := c.loadOne(ctx, db, map[string]any{"classname": "_user", "keyname": login, "password": pw,
			"_action": string(model.ActionUpdate)}, ""); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "password of %s set\n", login)
		return nil
	}
}

func setupUserList(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return reading(c, func(ctx context.Context, db *store.DB) error {
		return db.EachInstance(ctx, "_user", func(in *store.Instance) error {
			state := "enabled"
			if !in.IsEnabled {
				state = "disabled"
			}
			name := strings.TrimSpace(fmt.Sprintf("%v %v", orEmpty(in.Data["firstname"]), orEmpty(in.Data["lastname"])))
			fmt.Fprintf(c.stdout, "%s\t%s\temail=%v\tname=%s\n", in.Keyname, state, orDash(in.Data["email"]), pick(name, "-"))
			return nil
		})
	})
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func setupUserDisable(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	enable := fs.Bool("enable", false, "enable the account instead")
	return func(ctx context.Context, args []string) error {
		login := args[0]
		action := string(model.ActionDisable)
		if *enable {
			action = string(model.ActionEnable)
		} else if login == "admin" {
			return fmt.Errorf("the admin account is locked by leaving SERVICE_ADMIN_PASSWORD unset, not disabled")
		}
		db, _, _, err := c.open(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := db.Instance(ctx, "_user", login); err != nil {
			return fmt.Errorf("user %q not found", login)
		}
		if err := c.loadOne(ctx, db, map[string]any{"classname": "_user", "keyname": login, "_action": action}, ""); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "user %s %sd\n", login, action)
		return nil
	}
}

func setupPermissionList(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return reading(c, func(ctx context.Context, db *store.DB) error {
		list, err := db.Permissions(ctx)
		if err != nil {
			return err
		}
		for _, p := range list {
			kind := "custom"
			if p.IsBuiltin {
				kind = "built-in"
			}
			fmt.Fprintf(c.stdout, "%-22s %-9s %s\n", p.Keyname, kind, pick(p.Description, p.Displayname))
		}
		return nil
	})
}
