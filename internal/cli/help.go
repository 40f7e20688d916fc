package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

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
