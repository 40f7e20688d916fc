package cli

import (
	"context"

	"github.com/spf13/pflag"
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
		{name: "schedule list", maxArgs: 0,
			summary: "list schedules: cron, zone, missed-run policy, the next three run times, the last run",
			details: "Next run times are shown in each schedule's own zone, with its UTC offset. LAST is what\nthe last due run did (submitted, skipped, failed) and LAST TASK its task (\"task show\").\nSchedules are _schedule instances: load or edit them like any other (docs/events.md).",
			setup:   setupScheduleList},
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
			details: "FILE  where to write the copy; it must not exist.\nEncrypted secrets (event rules' signing secrets) are in it sealed, their key is not:\nkeep a copy of the key file (<db>.key, or SERVICE_SECRET_KEY_FILE) with the backups\n(docs/events.md, The signing key).",
			setup:   setupBackup},
		{name: "restore", args: "FILE", minArgs: 1, maxArgs: 1,
			summary: "replace the stopped database with a backup; the next serve or migrate migrates it",
			details: "FILE  a backup (dataservice backup, a scheduled or pre-migration .bak). Refused while any\n      process has the database open; the copy is checked first; the current file is kept\n      as <db>.before-restore.<timestamp> (docs/operations.md).",
			setup:   setupRestore},
		{name: "copy", maxArgs: 0,
			summary: "copy a whole database into a new, empty one: SQLite to PostgreSQL, or back",
			details: "--from  the database to copy: a SQLite file or a postgres:// URL; opened read-only.\n--to    a new file, or an empty PostgreSQL database: refused when it holds any data.\nEvery table is copied in one transaction and verified by its row count and a checksum\nbefore it commits; on any failure nothing is left in the target (docs/postgres.md).\nEncrypted secrets (event rules' signing secrets) are copied sealed: carry the source's\nkey file (<db>.key, or SERVICE_SECRET_KEY_FILE) to the target, or set them again.",
			setup:   setupCopy},
		{name: "version", maxArgs: 0,
			summary: "print SERVICE_VERSION and SERVICE_VERSION_DATE (also: --version)",
			setup:   setupVersion},
		{name: "help", args: "[COMMAND]", maxArgs: 2,
			summary: "list the commands, or show one command's usage and flags",
			setup:   setupHelp},
	}
}
