package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// readLoadFiles expands files and directories (their .yml, .yaml and .json files in
// name order) and checks that each parses; it returns the files, per-file errors and
// warnings. Files that parse item by item are read again, item by item, by the load.
func readLoadFiles(paths []string) ([]*loadFile, []string, []string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, nil, nil, err
		}
		var names []string
		for _, e := range ents {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if e.Type().IsRegular() && (ext == ".yml" || ext == ".yaml" || ext == ".json") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, filepath.Join(p, n))
		}
	}
	var out []*loadFile
	var problems, warnings []string
	for _, f := range files {
		lf := &loadFile{name: filepath.Base(f), path: f}
		ok, err := checkStream(lf)
		if err != nil {
			return nil, nil, nil, err
		}
		if ok {
			out = append(out, lf)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, nil, err
		}
		entries, warn, err := codec.ParseDocumentLenient(lf.name, data)
		if err != nil {
			problems = append(problems, store.ErrorMessage(err))
			continue
		}
		warnings = append(warnings, warn...)
		lf.entries = entries
		out = append(out, lf)
	}
	return out, problems, warnings, nil
}

// loadFile is a file to load: streamed (read item by item while loading, after a
// first reading checked every item parses) or parsed whole into entries.
type loadFile struct {
	name, path string
	stream     bool
	entries    []*model.Entry
}

// checkStream reads the file item by item without keeping anything: true when the
// whole file parses that way, so it can be loaded as it is read.
func checkStream(lf *loadFile) (bool, error) {
	f, err := os.Open(lf.path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = codec.StreamDocument(lf.name, f, func(*model.Entry) error { return nil })
	if errors.Is(err, codec.ErrNotStreamable) {
		return false, nil
	}
	lf.stream = err == nil
	return lf.stream, err
}

// loadSource yields the entries of files in order, streaming those that stream.
func loadSource(files []*loadFile) func(yield func(*model.Entry) error) error {
	return func(yield func(*model.Entry) error) error {
		for _, lf := range files {
			if !lf.stream {
				for _, e := range lf.entries {
					if err := yield(e); err != nil {
						return err
					}
				}
				continue
			}
			f, err := os.Open(lf.path)
			if err != nil {
				return err
			}
			err = codec.StreamDocument(lf.name, f, yield)
			f.Close()
			if errors.Is(err, codec.ErrNotStreamable) {
				return fmt.Errorf("%s: the file changed while it was loaded", lf.path)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

func setupLoad(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	action := fs.String("action", "", "replace every entry's _action (create, update, init, delete, enable, disable, noop)")
	dryrun := fs.Bool("dryrun", false, "report what would change, write nothing")
	pipe := fs.String("pipeline", "", "apply this pipeline's rules to each entry before loading it")
	strict := fs.Bool("strict", false, "refuse entries that name fields their schema does not have (default: ignore them, with a warning)")
	return func(ctx context.Context, args []string) error {
		return c.load(ctx, args, *action, *dryrun, *pipe, *strict)
	}
}

func (c *cli) load(ctx context.Context, args []string, action string, dryrun bool, pipe string, strict bool) error {
	switch model.Action(action) {
	case "", model.ActionCreate, model.ActionUpdate, model.ActionInit, model.ActionDelete, model.ActionEnable, model.ActionDisable, model.ActionNoop:
	default:
		return &usageError{c.find("load"), fmt.Sprintf("--action %q: not create, update, init, delete, enable, disable or noop", action)}
	}
	files, problems, warnings, err := readLoadFiles(args)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
	db, _, _, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := store.LoadOptions{Action: model.Action(action), DryRun: dryrun, Strict: strict}
	if pipe != "" {
		// The API's load-time pipeline, with its checks: a disabled pipeline or one
		// whose content does not parse is refused, as it is there.
		if opts.Transform, err = db.LoadTransform(ctx, model.SystemAuth(), pipe); err != nil {
			switch store.ErrorCode(err) {
			case model.ENotFound:
				return fmt.Errorf("pipeline %q not found", pipe)
			case model.EInternal:
				return err
			}
			return errors.New(store.ErrorMessage(err))
		}
	}
	res, err := db.LoadStream(ctx, loadSource(files), opts)
	if err != nil {
		return loadStopped(err, res)
	}
	for _, p := range problems {
		fmt.Fprintf(c.stderr, "error: %s\n", p)
	}
	// Every problem of each failed entry, entries in load order.
	for _, m := range res.Messages {
		for _, line := range m.Lines() {
			fmt.Fprintf(c.stderr, "error: %s\n", line)
		}
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
	prefix := ""
	if dryrun {
		prefix = "dry run: "
	}
	fmt.Fprintf(c.stdout, "%screated %d, updated %d, unchanged %d, deleted %d, enabled %d, disabled %d, skipped %d, errors %d\n",
		prefix, res.Created, res.Updated, res.Unchanged, res.Deleted, res.Enabled, res.Disabled, res.Skipped,
		res.Errors+len(problems))
	if res.Errors+len(problems) > 0 {
		return exitError(1)
	}
	return nil
}

func setupExport(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	schemas := fs.String("schema", "", "comma-separated schema names")
	all := fs.Bool("all", false, "every schema, built-in classes included (users, roles, keys without secrets...)")
	format := fs.String("format", "yaml", "yaml or json")
	return func(ctx context.Context, _ []string) error { return c.export(ctx, *schemas, *all, *format) }
}

func (c *cli) export(ctx context.Context, schemas string, all bool, format string) error {
	names := splitList(schemas)
	if len(names) == 0 && !all {
		return &usageError{c.find("export"), "--schema or --all is required"}
	}
	if format != "yaml" && format != "json" {
		return &usageError{c.find("export"), fmt.Sprintf("--format %q: yaml or json", format)}
	}
	db, _, _, err := c.openRead(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if all {
		if names, err = db.SchemaNames(ctx); err != nil {
			return err
		}
	}
	return db.Export(ctx, c.stdout, names, format)
}

// loadStopped is the error of a load that stopped part-way: what was committed before
// it, and (the disk being the cause) how to complete the load.
func loadStopped(err error, committed *store.LoadResult) error {
	if committed == nil || committed.DryRun {
		return err
	}
	n := committed.Loaded()
	if store.ErrorCode(err) != model.EDiskFull {
		return fmt.Errorf("%w\n%d entries were committed before the load stopped", err, n)
	}
	return fmt.Errorf("%w\n%d entries were committed before the disk filled (created %d, updated %d, unchanged %d, "+
		"deleted %d, enabled %d, disabled %d, skipped %d); after freeing space, load the same files again to "+
		"complete the load: entries already loaded come back unchanged", err, n, committed.Created, committed.Updated,
		committed.Unchanged, committed.Deleted, committed.Enabled, committed.Disabled, committed.Skipped)
}
