// Package cli is the dataservice command line: the command table, the settings, and
// the wiring of store, bootstrap, tasks and server that each command needs. The root
// main.go only calls Run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// Exit statuses of every command (documented in README.md "Commands").
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitTaskErrors: "pipeline run --wait" and "task wait" when the task succeeded
	// but some instances failed (the seed keeps the status "succeeded").
	exitTaskErrors = 3
)

// command is one entry of the command table. setup registers exactly the flags the
// command reads on fs and returns the function that runs it with the positional
// arguments left after parsing.
type command struct {
	name    string // one word, or "group sub"
	args    string // positional arguments as shown in the usage line
	minArgs int
	maxArgs int // -1: any number
	summary string
	details string // more help: what each positional argument is, rules, examples
	setup   func(c *cli, fs *pflag.FlagSet) func(ctx context.Context, args []string) error
}

// commandList is the command table: help, usage and dispatch all come from it. A new
// command is one more entry.
func commandList() []command {
	return []command{
		{name: "serve", maxArgs: 0,
			summary: "run the start-up sequence, then serve HTTP and run task workers until SIGINT/SIGTERM",
			setup:   setupServe},
		{name: "migrate", maxArgs: 0,
			summary: "run the start-up sequence and exit; --status only reports what would run",
			details: "Only serve and migrate run the start-up sequence (create the file, migrate it, apply\nSERVICE_ADMIN_PASSWORD to admin): run migrate with the service's settings. Every other\ncommand opens the database as it is and refuses one that needs this first.\n--status prints DB_VERSION, SERVICE_VERSION and the pending migration blocks and changes\nnothing: on a path where no database exists it creates nothing.",
			setup:   setupMigrate},
		{name: "load", args: "FILE|DIR...", minArgs: 1, maxArgs: -1,
			summary: "load YAML/JSON files (a directory: its .yml/.yaml/.json files in name order) with every permission",
			details: "FILE|DIR  files in the load format (docs/loading.md); exit status 1 when any entry failed,\n          after loading the others.",
			setup:   setupLoad},
		{name: "export", maxArgs: 0,
			summary: "write schema definitions and instances in the load format to stdout (never secrets)",
			setup:   setupExport},
		{name: "apikey create", args: "KEYNAME", minArgs: 1, maxArgs: 1,
			summary: "create an API key and print KEYNAME:SECRET once",
			details: "KEYNAME  the new key's name (it must not exist yet).\nPermission names are checked; see \"dataservice permission list\" and docs/users.md for\nready-made sets. A key without permissions can only authenticate (a warning says so).",
			setup:   setupAPIKeyCreate},
		{name: "apikey list", maxArgs: 0,
			summary: "list API keys (never their secrets)",
			setup:   setupAPIKeyList},
		{name: "apikey revoke", args: "KEYNAME", minArgs: 1, maxArgs: 1,
			summary: "delete an API key",
			details: "KEYNAME  the key to delete; exit status 1 when it does not exist.",
			setup:   setupAPIKeyRevoke},
		{name: "user add", args: "LOGIN", minArgs: 1, maxArgs: 1,
			summary: "create a user account; the password is read from stdin (first line)",
			details: "LOGIN  the new account's login. Without --no-password the first line of stdin is its\n       password, e.g.  printf '%s\\n' \"$PW\" | dataservice user add alice --email a@x.org",
			setup:   setupUserAdd},
		{name: "user passwd", args: "LOGIN", minArgs: 1, maxArgs: 1,
			summary: "set a user's password, read from stdin (first line)",
			details: "LOGIN  an existing account. The admin account's password is forced from\n       SERVICE_ADMIN_PASSWORD at every serve and migrate: change that setting instead.",
			setup:   setupUserPasswd},
		{name: "user list", maxArgs: 0,
			summary: "list user accounts: login, enabled, email, name",
			setup:   setupUserList},
		{name: "user disable", args: "LOGIN", minArgs: 1, maxArgs: 1,
			summary: "disable a user account (--enable turns it back on)",
			details: "LOGIN  an existing account; a disabled account cannot log in, its API keys stop\n       acting for it.",
			setup:   setupUserDisable},
		{name: "permission list", maxArgs: 0,
			summary: "list every permission and what it gates",
			setup:   setupPermissionList},
		{name: "pipeline list", maxArgs: 0,
			summary: "list pipelines: id, keyname, run_permission",
			setup:   setupPipelineList},
		{name: "pipeline run", args: "NAME", minArgs: 1, maxArgs: 1,
			summary: "submit a pipeline task over schemas; --wait runs it here with progress",
			details: "NAME  the pipeline's keyname (or id).\nWith --wait: one progress line with rate and ETA; the first Ctrl-C cancels the task, a\nsecond exits at once. Exit status 1 when the task failed or was cancelled, 3 when it\nsucceeded with errors (the first error messages are printed).",
			setup:   setupPipelineRun},
		{name: "task list", maxArgs: 0,
			summary: "list tasks, newest first",
			setup:   setupTaskList},
		{name: "task show", args: "HANDLE", minArgs: 1, maxArgs: 1,
			summary: "show one task: status, progress, errors first, counters, changes",
			details: "HANDLE  the task's handle (printed by \"pipeline run\", returned by the API).",
			setup:   setupTaskShow},
		{name: "task cancel", args: "HANDLE", minArgs: 1, maxArgs: 1,
			summary: "cancel a task: a queued one at once, a running one after its current batch",
			details: "HANDLE  the task's handle.",
			setup:   setupTaskCancel},
		{name: "task wait", args: "HANDLE", minArgs: 1, maxArgs: 1,
			summary: "wait until a task finishes (a running server processes it) and print its result",
			details: "HANDLE  the task's handle. Exit status as \"pipeline run --wait\": 1 failed or\ncancelled, 3 succeeded with errors. Ctrl-C stops waiting and leaves the task alone.",
			setup:   setupTaskWait},
		{name: "ipam collect", maxArgs: 0,
			summary: "create the missing ipam_ip instances for every stored ipv4 value",
			setup:   setupIPAMCollect},
		{name: "backup", args: "FILE", minArgs: 1, maxArgs: 1,
			summary: "consistent online copy of the database (VACUUM INTO)",
			details: "FILE  where to write the copy; it must not exist.",
			setup:   setupBackup},
		{name: "restore", args: "FILE", minArgs: 1, maxArgs: 1,
			summary: "replace the stopped database with a backup; the next serve or migrate migrates it",
			details: "FILE  a backup (dataservice backup, a scheduled or pre-migration .bak). Refused while any\n      process has the database open; the copy is checked first; the current file is kept\n      as <db>.before-restore.<timestamp> (docs/operations.md).",
			setup:   setupRestore},
		{name: "version", maxArgs: 0,
			summary: "print SERVICE_VERSION and SERVICE_VERSION_DATE (also: --version)",
			setup:   setupVersion},
		{name: "help", args: "[COMMAND]", maxArgs: 2,
			summary: "list the commands, or show one command's usage and flags",
			setup:   setupHelp},
	}
}

// valueFlags are the flags accepted before the command word that take a value; the
// scan that finds the command word must skip their values.
var valueFlags = map[string]bool{"db": true, "log-level": true, "log-format": true, "backup": true,
	"listen": true, "base-url": true, "workers": true}

// usageError is a mistake in the command line: exit status 2 with the command's usage.
type usageError struct {
	cmd *command
	msg string
}

func (e *usageError) Error() string { return e.msg }

// exitError ends a command with a status and no further message.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// splitCommand finds the command words (the first non-flag argument, and the second
// when the first is a group such as "apikey") and returns them with the other
// arguments in their order. It also reports -h/--help and --version anywhere.
func splitCommand(args []string, groups map[string]bool) (words, rest []string, help, version bool) {
	positional := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if positional {
			rest = append(rest, a)
			continue
		}
		switch {
		case a == "--":
			positional = true
			rest = append(rest, a)
			continue
		case a == "-h" || a == "--help":
			help = true
			continue
		case a == "--version":
			version = true
			continue
		case strings.HasPrefix(a, "-") && a != "-":
			rest = append(rest, a)
			if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && valueFlags[name] && i+1 < len(args) {
				i++
				rest = append(rest, args[i])
			}
			continue
		}
		if len(words) == 0 || (len(words) == 1 && groups[words[0]]) {
			words = append(words, a)
			continue
		}
		rest = append(rest, a)
	}
	return words, rest, help, version
}

// Run is the whole program: it runs the command that args name (the arguments after the
// program's name) with the settings getenv gives and the standard streams given, and
// returns the exit status. Serve runs until ctx ends; a waiting command treats the
// end of ctx as the interrupt. A nil stdin is empty input. Tests run commands
// in-process through it.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr, stdin: stdin, commands: commandList()}
	groups := map[string]bool{}
	for _, cmd := range c.commands {
		if g, _, ok := strings.Cut(cmd.name, " "); ok {
			groups[g] = true
		}
	}
	words, rest, help, showVersion := splitCommand(args, groups)
	if showVersion {
		fmt.Fprintf(stdout, "dataservice %s (%s)\n", pick(getenv("SERVICE_VERSION"), version),
			pick(getenv("SERVICE_VERSION_DATE"), versionDate))
		return exitOK
	}
	if len(words) == 0 {
		if len(rest) > 0 && !help {
			fmt.Fprintf(stderr, "dataservice: no command given (flags alone do not start the server: use \"dataservice serve\")\n\n")
			c.printCommands(stderr)
			return exitUsage
		}
		c.printCommands(stdout)
		return exitOK
	}
	cmd := c.find(strings.Join(words, " "))
	if cmd == nil {
		if groups[words[0]] {
			w := stderr
			code := exitUsage
			if help && len(words) == 1 {
				w, code = stdout, exitOK
			} else if len(words) == 1 {
				fmt.Fprintf(stderr, "dataservice %s: which %s command?\n\n", words[0], words[0])
			} else {
				fmt.Fprintf(stderr, "dataservice %s: unknown command %q\n\n", words[0], words[1])
			}
			c.printGroup(w, words[0])
			return code
		}
		fmt.Fprintf(stderr, "dataservice: unknown command %q%s\n\n", words[0], suggestion(words[0], c.names()))
		c.printCommands(stderr)
		return exitUsage
	}
	fs := pflag.NewFlagSet(cmd.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	exec := cmd.setup(c, fs)
	if help {
		c.printUsage(stdout, cmd, fs)
		return exitOK
	}
	err := fs.Parse(rest)
	if err != nil {
		err = &usageError{cmd, err.Error()}
	} else {
		err = checkArgs(cmd, fs)
	}
	if err == nil {
		err = exec(ctx, fs.Args())
	}
	var ee exitError
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return int(ee)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "dataservice %s: %s\n", cmd.name, ue.msg)
		fmt.Fprintf(stderr, "usage: %s\nRun \"dataservice help %s\" for the flags.\n", usageLine(cmd), cmd.name)
		return exitUsage
	}
	fmt.Fprintf(stderr, "dataservice %s: %v\n", cmd.name, err)
	return exitFailure
}

// checkArgs checks the number of positional arguments and refuses empty values of
// the settings flags (--db "" would otherwise silently mean the default).
func checkArgs(cmd *command, fs *pflag.FlagSet) error {
	n := fs.NArg()
	switch {
	case n < cmd.minArgs:
		return &usageError{cmd, fmt.Sprintf("missing %s", cmd.args)}
	case cmd.maxArgs >= 0 && n > cmd.maxArgs:
		return &usageError{cmd, fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args()[cmd.maxArgs:], " "))}
	}
	var bad []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "string" && strings.TrimSpace(f.Value.String()) == "" && settingFlagNames[f.Name] {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return &usageError{cmd, fmt.Sprintf("%s: empty value (leave the flag out for the default)", strings.Join(bad, ", "))}
	}
	return nil
}

func (c *cli) find(name string) *command {
	for i := range c.commands {
		if c.commands[i].name == name {
			return &c.commands[i]
		}
	}
	return nil
}

func (c *cli) names() []string {
	seen := map[string]bool{}
	var out []string
	for _, cmd := range c.commands {
		w, _, _ := strings.Cut(cmd.name, " ")
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func usageLine(cmd *command) string {
	s := "dataservice " + cmd.name
	if cmd.args != "" {
		s += " " + cmd.args
	}
	return s + " [flags]"
}

// printCommands lists every command with one line each.
func (c *cli) printCommands(w io.Writer) {
	fmt.Fprint(w, "usage: dataservice COMMAND [ARGUMENTS] [flags]\n\ncommands:\n")
	width := 0
	for _, cmd := range c.commands {
		if n := len(cmd.name) + 1 + len(cmd.args); n > width {
			width = n
		}
	}
	for _, cmd := range c.commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
	}
	fmt.Fprint(w, `
Flags go before or after the command: dataservice --db x.db apikey list
  --db FILE, --log-level L, --log-format F                    where the command opens the database
  --backup on|off                                             serve and migrate (the start-up sequence)
  --version                                                   print the version and exit
  -h, --help                                                  this list, or a command's usage

"dataservice help COMMAND" or "dataservice COMMAND --help" shows a command's arguments and flags.
Settings also come from SERVICE_* environment variables; a flag wins (docs/configuration.md).
Exit status: 0 success, 1 failure, 2 usage error, 3 a waited-for task succeeded with errors.
`)
}

// printGroup lists the commands of a group such as "apikey".
func (c *cli) printGroup(w io.Writer, group string) {
	fmt.Fprintf(w, "usage: dataservice %s COMMAND [ARGUMENTS] [flags]\n\ncommands:\n", group)
	for _, cmd := range c.commands {
		if strings.HasPrefix(cmd.name, group+" ") {
			fmt.Fprintf(w, "  %-28s  %s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
		}
	}
	fmt.Fprintf(w, "\nRun \"dataservice help %s COMMAND\" for a command's arguments and flags.\n", group)
}

// printUsage shows one command's usage: positional arguments, details and its flags.
func (c *cli) printUsage(w io.Writer, cmd *command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", usageLine(cmd), cmd.summary)
	if cmd.details != "" {
		fmt.Fprintf(w, "\n%s\n", cmd.details)
	}
	if fs.HasFlags() {
		fmt.Fprintf(w, "\nflags:\n%s", fs.FlagUsages())
	}
	fmt.Fprintf(w, "  -h, --help   show this help\n")
}

// setupHelp: "help [COMMAND]".
func setupHelp(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	return func(_ context.Context, args []string) error {
		if len(args) == 0 {
			c.printCommands(c.stdout)
			return nil
		}
		name := strings.Join(args, " ")
		if cmd := c.find(name); cmd != nil {
			cfs := pflag.NewFlagSet(cmd.name, pflag.ContinueOnError)
			cfs.SortFlags = false
			cmd.setup(c, cfs)
			c.printUsage(c.stdout, cmd, cfs)
			return nil
		}
		for _, cmd := range c.commands {
			if strings.HasPrefix(cmd.name, args[0]+" ") && len(args) == 1 {
				c.printGroup(c.stdout, args[0])
				return nil
			}
		}
		return &usageError{c.find("help"), fmt.Sprintf("unknown command %q%s", name, suggestion(args[0], c.names()))}
	}
}

// suggestion returns `; did you mean "x"?` for the closest of names, or "".
func suggestion(got string, names []string) string {
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := editDistance(got, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" || bestD > max(2, len(got)/3) {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// closest returns the name of names closest to got, or "" when none is close.
func closest(got string, names []string) string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	best, bestD := "", 1<<30
	for _, n := range sorted {
		if d := editDistance(got, n); d < bestD {
			best, bestD = n, d
		}
	}
	if bestD > max(3, len(got)/2) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func pick(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
