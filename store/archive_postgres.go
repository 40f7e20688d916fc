package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A pg_dump archive is read as data only, never sent to the server as SQL: a
// crafted archive is arbitrary SQL (its entries' definitions, the COPY statement of
// every TABLE DATA entry, even its search path), run with the restoring role's
// privileges. pg_restore --data-only --file=- prints, without connecting, the script
// it would run; archiveScript reads that text line by line and accepts only the forms
// pg_dump writes for a table's rows and a sequence's value. The statements the
// server runs are the store's own, built from its layout.

// archiveHandler is what an archive's script holds, as archiveScript passes it on.
type archiveHandler interface {
	// copyRows gets table's rows, in COPY's text format, for the columns cols
	// (unquoted names, as the archive names them); data ends at the end of the rows.
	copyRows(table string, cols []string, data io.Reader) error
	// setSequence gets a sequence's value as setval sets it.
	setSequence(seq string, value int64, called bool) error
}

// The header lines pg_dump writes before the data: settings of the session that
// would run the script, read and never run.
var (
	archiveSet        = regexp.MustCompile(`^SET [a-z_]+ = [A-Za-z0-9_' .-]*;$`)
	archiveSearchPath = regexp.MustCompile(`^SELECT pg_catalog\.set_config\('search_path', '[A-Za-z0-9_", ]*', false\);$`)
	// psql's meta-commands pg_dump writes around the script (\restrict KEY and
	// \unrestrict KEY, which psql takes to refuse other meta-commands in between).
	archiveRestrict = regexp.MustCompile(`^\\(un)?restrict [A-Za-z0-9]+$`)
	archiveSetval   = regexp.MustCompile(`^SELECT pg_catalog\.setval\('((?:[^']|'')+)', (-?[0-9]+), (true|false)\);$`)
)

// ErrArchiveRefused is the error of an archive whose script holds anything but
// header lines, table rows of the service's layout and its sequences' values.
var ErrArchiveRefused = errors.New("the archive is refused")

// archiveScript reads the script of pg_restore --data-only --file=- from r, passing
// every table's rows and every sequence's value to h. Any other line refuses the
// archive, naming its number and what it starts with.
func archiveScript(r io.Reader, h archiveHandler) error {
	br := bufio.NewReaderSize(r, 64*1024)
	line, at := 0, 0
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d of its script (pg_restore --data-only --file=-): %s", ErrArchiveRefused, at, fmt.Sprintf(format, args...))
	}
	for {
		text, err := br.ReadString('\n')
		if err == io.EOF && text == "" {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read the archive: %w", err)
		}
		line++
		at = line
		text = strings.TrimSuffix(text, "\n")
		switch {
		case text == "", strings.HasPrefix(text, "--"), archiveSet.MatchString(text),
			archiveSearchPath.MatchString(text), archiveRestrict.MatchString(text):
		case strings.HasPrefix(text, "COPY "):
			table, cols, ok := parseArchiveCopy(text)
			if !ok {
				return refuse("%s is not a table's rows as pg_dump writes them (COPY schema.table (columns) FROM stdin;)", clipLine(text))
			}
			d := &copyData{r: br, line: &line, table: table}
			if err := h.copyRows(table, cols, d); err != nil {
				if d.err != nil {
					return d.err
				}
				if errors.Is(err, ErrArchiveRefused) {
					return refuse("%s", strings.TrimPrefix(err.Error(), ErrArchiveRefused.Error()+": "))
				}
				return fmt.Errorf("load %s (line %d): %w", table, at, err)
			}
			// Rows the handler did not read are read past, to their end.
			if _, err := io.Copy(io.Discard, d); err != nil {
				return err
			}
		default:
			m := archiveSetval.FindStringSubmatch(text)
			if m == nil {
				return refuse("%s is neither a table's rows nor a sequence's value", clipLine(text))
			}
			seq, ok := parseArchiveName(strings.ReplaceAll(m[1], "''", "'"))
			n, err := strconv.ParseInt(m[2], 10, 64)
			if !ok || err != nil {
				return refuse("%s is not a sequence's value as pg_dump writes it", clipLine(text))
			}
			if err := h.setSequence(seq, n, m[3] == "true"); err != nil {
				if errors.Is(err, ErrArchiveRefused) {
					return refuse("%s", strings.TrimPrefix(err.Error(), ErrArchiveRefused.Error()+": "))
				}
				return fmt.Errorf("set the sequence %s (line %d): %w", seq, at, err)
			}
		}
	}
}

// clipLine is a script line for a message: at most 120 characters, quoted.
func clipLine(s string) string {
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return strconv.Quote(s)
}

// copyData reads a table's rows from the script, line by line, up to their end
// marker `\.`, which it does not pass on.
type copyData struct {
	r     *bufio.Reader
	line  *int
	table string
	buf   []byte
	done  bool
	err   error
}

func (d *copyData) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	for len(d.buf) == 0 {
		if d.done {
			return 0, io.EOF
		}
		b, err := d.r.ReadBytes('\n')
		if err != nil {
			d.err = fmt.Errorf("%w: the archive's script ends inside the rows of %s (line %d)", ErrArchiveRefused, d.table, *d.line)
			if err != io.EOF {
				d.err = fmt.Errorf("read the archive: %w", err)
			}
			return 0, d.err
		}
		*d.line++
		if string(b) == "\\.\n" {
			d.done = true
			return 0, io.EOF
		}
		d.buf = b
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}

// parseArchiveCopy reads `COPY schema.table (col, col, ...) FROM stdin;`: the
// table's name (without its schema) and the columns', unquoted.
func parseArchiveCopy(s string) (table string, cols []string, ok bool) {
	rest, ok := strings.CutPrefix(s, "COPY ")
	if !ok {
		return "", nil, false
	}
	if _, rest, ok = cutIdent(rest); !ok {
		return "", nil, false
	}
	if rest, ok = strings.CutPrefix(rest, "."); !ok {
		return "", nil, false
	}
	if table, rest, ok = cutIdent(rest); !ok {
		return "", nil, false
	}
	if rest, ok = strings.CutPrefix(rest, " ("); !ok {
		return "", nil, false
	}
	for {
		var c string
		if c, rest, ok = cutIdent(rest); !ok {
			return "", nil, false
		}
		cols = append(cols, c)
		if r, more := strings.CutPrefix(rest, ", "); more {
			rest = r
			continue
		}
		break
	}
	if rest != ") FROM stdin;" {
		return "", nil, false
	}
	return table, cols, true
}

// parseArchiveName reads schema.name (the text of a setval's regclass literal) and
// returns name, unquoted.
func parseArchiveName(s string) (string, bool) {
	_, rest, ok := cutIdent(s)
	if !ok {
		return "", false
	}
	if rest, ok = strings.CutPrefix(rest, "."); !ok {
		return "", false
	}
	name, rest, ok := cutIdent(rest)
	return name, ok && rest == ""
}

// cutIdent cuts an identifier as pg_dump writes one (lower-case letters, digits,
// underscores; or double-quoted with "" for a quote) from the start of s.
func cutIdent(s string) (ident, rest string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != '"' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			return b.String(), s[i+1:], b.Len() > 0
		}
		return "", "", false
	}
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] == '_' || i > 0 && (s[i] >= '0' && s[i] <= '9' || s[i] == '$')) {
		i++
	}
	return s[:i], s[i:], i > 0
}

// readArchive runs pg_restore --data-only --file=- on file (no database: it only
// prints the script) for the tables named, or every table when none is, and reads
// the script with archiveScript as it comes.
func readArchive(ctx context.Context, file string, h archiveHandler, tables ...string) error {
	path, err := postgresTool("pg_restore")
	if err != nil {
		return err
	}
	args := []string{"--data-only", "--file=-"}
	for _, t := range tables {
		args = append(args, "--table="+t)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(args, file)...)
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 2000}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("pg_restore: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pg_restore: %w", err)
	}
	perr := archiveScript(out, h)
	if perr != nil {
		cancel() // stop pg_restore: nothing more is read
	}
	werr := cmd.Wait()
	if perr != nil {
		return perr
	}
	if werr != nil {
		return fmt.Errorf("pg_restore: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// archiveVersions reads the layout versions an archive records: store's (its
// layout_version table's row) and each owner's (layout_versions).
type archiveVersions struct {
	store  int
	owners map[string]int
	seen   bool
}

func (v *archiveVersions) copyRows(table string, cols []string, data io.Reader) error {
	rows, err := readCopyRows(data, 1000)
	if err != nil {
		return err
	}
	switch {
	case table == "layout_version" && len(cols) == 1 && cols[0] == "version" && len(rows) == 1 && len(rows[0]) == 1:
		n, err := strconv.Atoi(rows[0][0])
		if err != nil || n < 0 {
			return fmt.Errorf("%w: its layout_version row %q is not a version", ErrArchiveRefused, rows[0][0])
		}
		v.store, v.seen = n, true
	case table == "layout_versions" && len(cols) == 2 && cols[0] == "owner" && cols[1] == "version":
		for _, r := range rows {
			n, err := -1, error(nil)
			if len(r) == 2 {
				n, err = strconv.Atoi(r[1])
			}
			if err != nil || n < 0 {
				return fmt.Errorf("%w: its layout_versions row %q is not an owner's version", ErrArchiveRefused, strings.Join(r, " "))
			}
			v.owners[r[0]] = n
		}
	default:
		return fmt.Errorf("%w: the rows of %s are not a layout version", ErrArchiveRefused, table)
	}
	return nil
}

func (v *archiveVersions) setSequence(string, int64, bool) error { return nil }

// readCopyRows reads at most max rows of COPY text data whose values hold no
// escapes (the version tables' names and numbers), each split into its values.
func readCopyRows(data io.Reader, max int) ([][]string, error) {
	b, err := io.ReadAll(io.LimitReader(data, 1<<20))
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		if strings.Contains(l, `\`) || len(rows) == max {
			return nil, fmt.Errorf("%w: a layout version row %q", ErrArchiveRefused, clipLine(l))
		}
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows, nil
}

// The names a layout's steps give their indexes and triggers.
var (
	createIndex   = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)`)
	createTrigger = regexp.MustCompile(`(?i)\bCREATE\s+TRIGGER\s+([A-Za-z_][A-Za-z0-9_]*)`)
	archiveEntry  = regexp.MustCompile(`^[0-9]+; [0-9]+ [0-9]+ (.*)$`)
)

// checkArchiveEntries refuses an archive whose table of contents (pg_restore
// --list, read as text) holds schema objects the service's layout does not create:
// a function, trigger, rule, view, policy, event trigger, database setting or table
// of its own. A restore never runs them (it takes the data only), but an archive
// holding them is not a backup of the service's database as it made it. Comments
// and privileges are not code and pass; rows and sequence values are read by
// archiveScript.
func checkArchiveEntries(ctx context.Context, file string, steps []string) error {
	out, err := runPostgresTool(ctx, "pg_restore", "", "--list", file)
	if err != nil {
		return fmt.Errorf("not a pg_dump archive (pg_dump -Fc): %w", err)
	}
	tables := layoutNames(createTable, steps...)
	in := func(re *regexp.Regexp, name string) bool { return slices.Contains(layoutNames(re, steps...), name) }
	var foreign []string
	for _, line := range strings.Split(string(out), "\n") {
		m := archiveEntry.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue // the listing's comments (;) and blank lines
		}
		entry := m[1]
		f := strings.Fields(entry)
		ok := false
		switch {
		case strings.HasPrefix(entry, "TABLE DATA "), strings.HasPrefix(entry, "SEQUENCE SET "),
			strings.HasPrefix(entry, "COMMENT "), strings.HasPrefix(entry, "ACL "),
			entry == "ENCODING", entry == "STDSTRINGS", entry == "SEARCHPATH":
			ok = true
		case entry == "EXTENSION - pg_trgm":
			ok = true
		case f[0] == "TABLE" && len(f) == 4:
			ok = slices.Contains(tables, f[2])
		case f[0] == "SEQUENCE" && len(f) == 4:
			for _, t := range tables {
				ok = ok || strings.HasPrefix(f[2], t+"_") && strings.HasSuffix(f[2], "_seq")
			}
		case f[0] == "INDEX" && len(f) == 4:
			ok = in(createIndex, f[2])
		case f[0] == "CONSTRAINT" && len(f) == 5:
			ok = slices.Contains(tables, f[2])
		case f[0] == "FK" && len(f) == 6 && f[1] == "CONSTRAINT":
			ok = slices.Contains(tables, f[3])
		case f[0] == "FUNCTION" && len(f) >= 4:
			name, _, _ := strings.Cut(f[2], "(")
			ok = in(createFunction, name)
		case f[0] == "TRIGGER" && len(f) == 5:
			ok = slices.Contains(tables, f[2]) && in(createTrigger, f[3])
		}
		if !ok {
			foreign = append(foreign, clipLine(entry))
		}
	}
	if len(foreign) > 0 {
		more := ""
		if len(foreign) > 10 {
			more = fmt.Sprintf(" and %d more", len(foreign)-10)
			foreign = foreign[:10]
		}
		return fmt.Errorf("%w: it holds schema objects the service's layout does not create (a backup of the service brings its data, never code): %s%s",
			ErrArchiveRefused, strings.Join(foreign, ", "), more)
	}
	return nil
}
