// Package cli is the dataservice command line: the command table, the settings, and
// the wiring of store, bootstrap, tasks and server that each command needs. The root
// main.go only calls Run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"dataservice/bootstrap"
	"dataservice/store/model"
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

// cli carries what every command needs.
type cli struct {
	getenv   func(string) string
	stdout   io.Writer
	stderr   io.Writer
	stdin    io.Reader
	commands []command
	sf       settingFlags // filled by the flags of the command being run
}

// logger writes the command's log lines to its stderr, at the level and in the format
// of the settings; bootstrap's critical lines say CRITICAL.
func (c *cli) logger(s *settings) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.LevelKey && len(groups) == 0 {
			if l, ok := a.Value.Any().(slog.Level); ok && l >= bootstrap.LevelCritical {
				a.Value = slog.StringValue("CRITICAL")
			}
		}
		return a
	}}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(c.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(c.stderr, opts))
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
	// An error that stands for several problems (a pipeline's bad rules): the others too.
	var me *model.Error
	if errors.As(err, &me) && len(me.Problems) > 1 {
		for _, p := range me.Problems[1:] {
			fmt.Fprintf(stderr, "dataservice %s: %s\n", cmd.name, p.Message)
		}
	}
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

func pick(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// splitList splits a comma-separated list, trimming items and dropping empty ones.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
