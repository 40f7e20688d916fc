package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"dataservice/internal/clip"
	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// loadReport is what the import tool and the code editor show after a load or a dry
// run: the counts, the failed entries, the warnings, and (code editor) the changes.
type loadReport struct {
	DryRun bool
	// Verb names what was done: "Check", "Import", "Validate", "Dry run", "Save".
	Verb   string
	Result *store.LoadResult
	// More is how many failed entries the result counts but does not list.
	More     int
	Warnings []string
	// Changes are the changes made (or that would be made) to objects the user may
	// read, field by field; ChangesMore counts those left out past the bound.
	Changes     []objectChange
	ChangesMore int
	ShowChanges bool
}

// objectChange is one object's change in a load report.
type objectChange struct {
	Classname, Keyname, Action, Link string
	Fields                           []change
}

// Total is the number of entries the report counts.
func (r *loadReport) Total() int {
	x := r.Result
	return x.Created + x.Updated + x.Unchanged + x.Deleted + x.Enabled + x.Disabled + x.Skipped + x.Errors
}

// Entries is the number of entries counted, in words ("1 entry", "3 entries").
func (r *loadReport) Entries() string {
	if n := r.Total(); n != 1 {
		return fmt.Sprintf("%d entries", n)
	}
	return "1 entry"
}

func newReport(verb string, res *store.LoadResult, warnings []string) *loadReport {
	rep := &loadReport{Verb: verb, DryRun: res.DryRun, Result: res, Warnings: append(warnings, res.Warnings...)}
	rep.More = res.Errors - len(res.Messages)
	return rep
}

// maxShownChanges bounds the changes a report lists.
const maxShownChanges = 1000

// changeRecorder collects a load's changes (LoadOptions.OnChange) to what auth may read.
type changeRecorder struct {
	c     *Console
	ctx   context.Context
	auth  *model.Auth
	list  []objectChange
	more  int
	perms map[string]string
	can   map[string]bool // readable, by class
}

func (c *Console) newChangeRecorder(ctx context.Context, auth *model.Auth) *changeRecorder {
	return &changeRecorder{c: c, ctx: ctx, auth: auth, perms: model.ClassPermissions(), can: map[string]bool{}}
}

func (cr *changeRecorder) add(rv store.Revision) {
	if !cr.readable(rv.Classname) {
		return
	}
	if len(cr.list) >= maxShownChanges {
		cr.more++
		return
	}
	oc := objectChange{Classname: rv.Classname, Keyname: rv.Keyname, Action: rv.Action, Fields: changes(rv)}
	if rv.Action != string(model.ActionDelete) && rv.Classname != "_schema" && rv.Classname != "_permission" {
		oc.Link = link(rv.Classname, rv.Keyname)
	}
	cr.list = append(cr.list, oc)
}

// readable: a schema's instances as CanRead says; schema and permission definitions
// for those who may write them.
// A class the database does not hold yet (a schema the same dry run creates) is not
// listed: its read permission is not known.
func (cr *changeRecorder) readable(cls string) bool {
	if ok, seen := cr.can[cls]; seen {
		return ok
	}
	var ok bool
	if cls == "_schema" || cls == "_permission" {
		ok = cr.auth.Has(cr.perms[cls])
	} else {
		sch, err := cr.c.db.Schema(cr.ctx, cls)
		ok = err == nil && model.CanRead(cr.auth, sch)
	}
	cr.can[cls] = ok
	return ok
}

// importData is the import tool's page: the form as posted (or its defaults), what
// the user may choose from, and the error or the report.
type importData struct {
	Format, Schema, Keyfield, Delimiter, Encoding, Pipeline string
	// Text is the pasted document; FileName the last uploaded file's name.
	Text, FileName     string
	Pipelines, Schemas []string
	Error, MaxSize     string
	Report             *loadReport
	// Kept is the token of the uploaded file the server keeps for the next Check or
	// Import (importSpool), KeptSize its size; KeptText says its text is in the box.
	Kept, KeptSize string
	KeptText       bool
	// Imported: the kept file was imported and is no longer kept.
	Imported bool
	// Lines are the document's lines around those an error names (Bad), to fix it.
	Lines []docLine
}

// importTool: /data/private/import/ — paste or upload YAML, JSON or CSV; Check runs
// it as a dry run, Import loads it, both with the user's permissions (p_data_import).
func (c *Console) importTool(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	d := &importData{Format: "yaml", Keyfield: "keyname", Encoding: "utf-8", MaxSize: sizeText(c.maxBody),
		Delimiter: c.db.ConfigValue(ctx, store.ConfigCSVDelimiter)}
	var err error
	if d.Pipelines, err = c.runnablePipelines(ctx, q.auth); err == nil {
		d.Schemas, err = c.writableSchemas(ctx, q.auth)
	}
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	if r.Method == http.MethodGet {
		c.render(w, r, q, http.StatusOK, "import", "Import", d)
		return
	}
	get := r.PostFormValue
	d.Format, d.Pipeline, d.Text = get("format"), strings.TrimSpace(get("pipeline")), strings.ReplaceAll(get("text"), "\r\n", "\n")
	d.Schema, d.Keyfield, d.Delimiter, d.Encoding = get("schema"), get("keyfield"), get("delimiter"), get("encoding")
	d.Kept, d.FileName = get("kept"), clip.Text(get("kept_name"))
	dry := get("do") != "import"
	verb := "Import"
	if dry {
		verb = "Check"
	}
	status, rep, msg, body := c.runImport(r, q, d, dry)
	if msg != "" {
		d.Error = msg
		d.Lines = markedLines(body, d.Format, d.Delimiter, msg, nil)
		c.render(w, r, q, status, "import", "Import", d)
		return
	}
	rep.Verb = verb
	d.Report = rep
	d.Lines = markedLines(body, d.Format, d.Delimiter, "", rep.Result.Messages)
	if !dry && d.Kept != "" {
		// Imported: the kept file has served its purpose.
		c.spool.drop(q.sess, d.Kept)
		d.Kept, d.KeptText, d.Imported = "", false, true
	}
	c.render(w, r, q, http.StatusOK, "import", "Import", d)
}

// documentText is body as the text box can show it: UTF-8 without NUL, at most
// keptTextMax bytes; ok is false for anything else (a Latin-1 CSV, a large file).
func documentText(body []byte) (string, bool) {
	if len(body) > keptTextMax || !utf8.Valid(body) || bytes.IndexByte(body, 0) >= 0 {
		return "", false
	}
	return strings.ReplaceAll(string(body), "\r\n", "\n"), true
}

// keptTextMax is the largest kept file whose text the import tool puts in its text box.
const keptTextMax = 256 << 10

// runImport reads the document (an uploaded file wins over pasted text), parses it as
// the API's load (YAML/JSON) or raw-file (CSV) endpoint does, and loads it with the
// user's permissions; on a refusal it returns the status and the message to show.
//
// The document is, in this order: a file chosen now (kept on the server for the next
// Check or Import, its text put in the text box when it is text), else the text box,
// else the file kept from the last Check (the form's token, which only this session's
// forms may name). It also returns the document, to show the lines an error names.
func (c *Console) runImport(r *http.Request, q *req, d *importData, dry bool) (int, *loadReport, string, []byte) {
	ctx := r.Context()
	body := []byte(d.Text)
	upload := false
	if r.MultipartForm != nil {
		if fhs := r.MultipartForm.File["file"]; len(fhs) > 0 && fhs[0].Filename != "" {
			fh := fhs[0]
			fr, err := fh.Open()
			if err != nil {
				c.log.Error("open upload", "error", err)
				return http.StatusInternalServerError, nil, "internal error", nil
			}
			body, err = io.ReadAll(io.LimitReader(fr, c.maxBody+1))
			fr.Close()
			if err != nil {
				c.log.Error("read upload", "error", err)
				return http.StatusInternalServerError, nil, "internal error", nil
			}
			d.FileName, upload = fh.Filename, true
		}
	}
	switch {
	case upload:
		if d.Kept != "" {
			c.spool.drop(q.sess, d.Kept) // replaced by the new file
		}
		d.Kept = c.spool.keep(q.sess, clip.Text(d.FileName), body)
	case d.Kept != "" && strings.TrimSpace(d.Text) == "":
		name, kept, err := c.spool.open(q.sess, d.Kept, c.maxBody)
		switch {
		case errors.Is(err, errSpoolForeign):
			d.Kept = ""
			return http.StatusForbidden, nil, "Refused: " + err.Error() + ".", nil
		case errors.Is(err, errSpoolGone):
			d.Kept, d.FileName = "", ""
			return http.StatusBadRequest, nil, "The file is gone: " + err.Error() + ".", nil
		case err != nil:
			c.log.Error("read kept upload", "error", err)
			return http.StatusInternalServerError, nil, "internal error", nil
		}
		body, d.FileName = kept, name
	}
	if d.Kept != "" && (upload || strings.TrimSpace(d.Text) == "") {
		d.KeptSize = sizeText(int64(len(body)))
		if text, ok := documentText(body); ok {
			// The file's text goes to the box, to be fixed there and checked again.
			d.Text, d.KeptText = text, true
		}
	} else if d.Kept != "" {
		d.KeptText = true // the box holds the kept file's text, perhaps edited
	}
	// The name is the client's, of any length: it is shown and quoted in messages, so
	// past its extension it is cut to what a message quotes.
	csvName := strings.HasSuffix(strings.ToLower(d.FileName), ".csv")
	d.FileName = clip.Text(d.FileName)
	if csvName && d.Format != "csv" {
		return http.StatusBadRequest, nil, d.FileName + " looks like a CSV file: choose the format CSV and the schema its rows belong to.", body
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return http.StatusBadRequest, nil, "Paste a document or choose a file.", nil
	}
	opts := store.LoadOptions{Auth: q.auth, DryRun: dry}
	if d.Pipeline != "" {
		tf, err := c.db.LoadTransform(ctx, q.auth, d.Pipeline)
		if err != nil {
			return c.refusalOf(r, err, body)
		}
		opts.Transform = tf
	}
	var entries []*model.Entry
	var warnings []string
	var err error
	name := d.FileName
	switch d.Format {
	case "csv":
		if strings.TrimSpace(d.Schema) == "" {
			return http.StatusBadRequest, nil, "Choose the schema the CSV rows belong to.", body
		}
		if d.Delimiter == "" {
			d.Delimiter = c.db.ConfigValue(ctx, store.ConfigCSVDelimiter)
		}
		co := codec.CSVOptions{Schema: d.Schema, Keyfield: d.Keyfield, Delimiter: d.Delimiter, Encoding: d.Encoding, MaxRows: c.maxEnt,
			MaxCells: codec.CSVMaxCells}
		entries, err = codec.ParseCSV(body, co)
	case "yaml", "":
		if name == "" {
			name = "document"
		}
		entries, warnings, err = codec.ParseBody(name, body, c.maxEnt)
	default:
		return http.StatusBadRequest, nil, "format must be yaml (YAML or JSON) or csv", body
	}
	if err != nil {
		return c.refusalOf(r, err, body)
	}
	res, err := c.db.Load(ctx, entries, opts)
	if err != nil {
		return c.refusalOf(r, err, body)
	}
	return http.StatusOK, newReport("", res, warnings), "", body
}

// refusalOf is refusal, passing the document on.
func (c *Console) refusalOf(r *http.Request, err error, body []byte) (int, *loadReport, string, []byte) {
	status, rep, msg := c.refusal(r, err)
	return status, rep, msg, body
}

// refusal is the status and message of a store error; internal errors are logged and
// shown only as "internal error".
func (c *Console) refusal(r *http.Request, err error) (int, *loadReport, string) {
	status := httperror.Status(err)
	if store.ErrorCode(err) == model.EDiskFull {
		err = c.db.NoSpace(err) // logged once per episode by the store, naming the file
	}
	if status == http.StatusInternalServerError {
		if !errors.Is(err, context.Canceled) && r.Context().Err() == nil {
			c.log.Error("console load failed", "path", r.URL.Path, "error", err)
		}
		return http.StatusInternalServerError, nil, "internal error"
	}
	return status, nil, store.ErrorText(err) // every problem (each bad rule of a load-time pipeline)
}

// runnablePipelines are the enabled pipelines auth may run.
func (c *Console) runnablePipelines(ctx context.Context, auth *model.Auth) ([]string, error) {
	pls, err := c.db.Pipelines(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pls {
		if p.IsEnabled && (p.RunPermission == nil || auth.Has(*p.RunPermission)) {
			out = append(out, p.Keyname)
		}
	}
	return out, nil
}

// writableSchemas are the schemas auth may create instances of (the CSV target).
func (c *Console) writableSchemas(ctx context.Context, auth *model.Auth) ([]string, error) {
	return c.schemaNames(ctx, func(s *model.Schema) bool {
		return model.CanWrite(auth, s, model.ActionCreate) || model.CanWrite(auth, s, model.ActionUpdate)
	})
}

// schemaNames lists the schemas keep accepts, by keyname.
func (c *Console) schemaNames(ctx context.Context, keep func(*model.Schema) bool) ([]string, error) {
	names, err := c.db.SchemaNames(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		s, err := c.db.Schema(ctx, n)
		if err != nil {
			return nil, err
		}
		if keep(s) {
			out = append(out, n)
		}
	}
	return out, nil
}

// sizeText is a byte count as a person reads it (32 MiB, 512 KiB).
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
