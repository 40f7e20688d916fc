package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"gopkg.in/yaml.v3"

	"dataservice/internal/clip"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// maxEditorObjects bounds the objects the code editor opens and the entries a
// document it validates, dry-runs or saves may hold (the import tool takes more).
const maxEditorObjects = 500

// editorData is the code editor's page: the choice (schema, keynames, format), the
// document, and the error or the report of the last action.
type editorData struct {
	Schemas              []string
	Schema, Keys, Format string
	// Action is the URL the editor posts to (the choice kept in its query).
	Action, Doc string
	// Opened shows the editor; Notes say what the opening left out.
	Opened bool
	Notes  []string
	Error  string
	Report *loadReport
	// Valid: the report has no failed entry. Saved: a save changed something (the
	// revisions link is shown).
	Valid, Saved bool
	Max          int
}

// codeEditor: /data/private/code_editor/ — GET ?schema=&keys=&format= opens objects
// in the load format (YAML or JSON); POST do=validate|dryrun|save checks, dry-runs or
// loads the edited document with the user's permissions (p_code_editor).
func (c *Console) codeEditor(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	qs := r.URL.Query()
	d := &editorData{Schema: strings.TrimSpace(qs.Get("schema")), Keys: strings.TrimSpace(qs.Get("keys")),
		Format: qs.Get("format"), Max: maxEditorObjects}
	if d.Format != "json" {
		d.Format = "yaml"
	}
	var err error
	d.Schemas, err = c.schemaNames(ctx, func(s *model.Schema) bool { return model.CanRead(q.auth, s) })
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	v := url.Values{"schema": {d.Schema}, "keys": {d.Keys}, "format": {d.Format}}
	d.Action = "/data/private/code_editor/?" + v.Encode()
	if r.Method == http.MethodPost {
		c.editorPost(w, r, q, d)
		return
	}
	if d.Schema != "" {
		if status, msg := c.openObjects(ctx, q.auth, d); msg != "" {
			c.errorPage(w, r, q, status, msg)
			return
		}
	}
	c.render(w, r, q, http.StatusOK, "code_editor", "Code editor", d)
}

// openObjects fills d.Doc with the chosen objects in the load format: those named by
// d.Keys, else the first maxEditorObjects of the schema. Secrets are left out (the
// load keeps a secret a document does not name), and so are external fields (they
// are computed, never stored).
func (c *Console) openObjects(ctx context.Context, auth *model.Auth, d *editorData) (int, string) {
	sch, err := c.db.Schema(ctx, d.Schema)
	if store.IsNotFound(err) {
		return http.StatusNotFound, fmt.Sprintf("There is no schema %s.", clip.Quote(d.Schema))
	}
	if err != nil {
		return http.StatusInternalServerError, "internal error"
	}
	if !model.CanRead(auth, sch) {
		return http.StatusForbidden, "You do not have the permission to read " + sch.Keyname + "."
	}
	var list []*store.Instance
	keys := strings.FieldsFunc(d.Keys, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	if len(keys) > maxEditorObjects {
		return http.StatusBadRequest, fmt.Sprintf("The editor opens at most %d objects; %d keynames were given.", maxEditorObjects, len(keys))
	}
	if len(keys) > 0 {
		var missing []string
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				continue
			}
			seen[k] = true
			in, err := c.db.Instance(ctx, sch.Keyname, k)
			if hex, herr := model.HexIP(k); store.IsNotFound(err) && herr == nil && strings.HasPrefix(sch.KeynameMode, "hexip") {
				in, err = c.db.Instance(ctx, sch.Keyname, hex) // an address named in a hexip schema
			}
			if store.IsNotFound(err) {
				missing = append(missing, k)
				continue
			}
			if err != nil {
				c.log.Error("code editor: read instance", "error", err)
				return http.StatusInternalServerError, "internal error"
			}
			list = append(list, in)
		}
		if len(missing) > 0 {
			d.Notes = append(d.Notes, "Not found in "+sch.Keyname+": "+strings.Join(missing, ", ")+".")
		}
	} else {
		res, err := c.db.ListInstances(ctx, sch, store.ListQuery{Limit: maxEditorObjects})
		if err != nil {
			c.log.Error("code editor: list instances", "error", err)
			return http.StatusInternalServerError, "internal error"
		}
		list = res.Instances
		if res.Count > len(list) {
			d.Notes = append(d.Notes, fmt.Sprintf("%s has %d instances: the first %d are open. Name keynames to edit others.",
				sch.Keyname, res.Count, len(list)))
		}
	}
	docs := make([]*model.Doc, 0, len(list))
	for _, in := range list {
		doc := c.db.InstanceDocAs(ctx, auth, sch, in)
		kept := doc.Keys[:0:0]
		for _, k := range doc.Keys {
			if f := sch.Field(k); f != nil && f.Dataformat == "external" {
				delete(doc.Vals, k)
				continue
			}
			kept = append(kept, k)
		}
		doc.Keys = kept
		docs = append(docs, doc)
	}
	text, err := encodeDocs(docs, d.Format)
	if err != nil {
		c.log.Error("code editor: encode", "error", err)
		return http.StatusInternalServerError, "internal error"
	}
	d.Doc, d.Opened = text, true
	return 0, ""
}

func encodeDocs(docs []*model.Doc, format string) (string, error) {
	if format == "json" {
		b, err := json.MarshalIndent(docs, "", "  ")
		return string(b) + "\n", err
	}
	if len(docs) == 0 {
		return "[]\n", nil
	}
	var sb strings.Builder
	enc := yaml.NewEncoder(&sb)
	enc.SetIndent(2)
	if err := enc.Encode(docs); err != nil {
		return "", err
	}
	err := enc.Close()
	return sb.String(), err
}

// editorPost checks (validate), dry-runs or saves the posted document. Validate and
// dry run write nothing: both run the load as a dry run, so every check the load makes
// (values, references, permissions, built-in protections) applies; validate reports only
// whether the document would load, dry run also what would change, field by field.
func (c *Console) editorPost(w http.ResponseWriter, r *http.Request, q *req, d *editorData) {
	ctx := r.Context()
	d.Doc, d.Opened = r.PostFormValue("doc"), true
	do := r.PostFormValue("do")
	verb := map[string]string{"validate": "Validate", "dryrun": "Dry run", "save": "Save"}[do]
	if verb == "" {
		c.errorPage(w, r, q, http.StatusBadRequest, "unknown action: do must be validate, dryrun or save")
		return
	}
	if strings.TrimSpace(d.Doc) == "" {
		d.Error = "The document is empty."
		c.render(w, r, q, http.StatusBadRequest, "code_editor", "Code editor", d)
		return
	}
	entries, warnings, err := codec.ParseBody("document", []byte(d.Doc), maxEditorObjects)
	if err != nil {
		status, _, msg := c.refusal(r, err)
		if store.ErrorCode(err) == model.ETooLarge {
			msg += fmt.Sprintf(" (the code editor takes at most %d objects; the import tool takes more)", maxEditorObjects)
		}
		d.Error = msg
		c.render(w, r, q, status, "code_editor", "Code editor", d)
		return
	}
	warnings = append(warnings, c.unknownKeys(ctx, entries)...)
	rec := c.newChangeRecorder(ctx, q.auth)
	res, err := c.db.Load(ctx, entries, store.LoadOptions{Auth: q.auth, DryRun: do != "save", OnChange: rec.add})
	if err != nil {
		status, _, msg := c.refusal(r, err)
		d.Error = msg
		c.render(w, r, q, status, "code_editor", "Code editor", d)
		return
	}
	rep := newReport(verb, res, warnings)
	rep.ShowChanges = do != "validate"
	rep.Changes, rep.ChangesMore = rec.list, rec.more
	d.Report, d.Valid = rep, res.Errors == 0
	d.Saved = do == "save" && len(rec.list) > 0
	c.render(w, r, q, http.StatusOK, "code_editor", "Code editor", d)
}

// unknownKeys warns about the keys of entries that are not fields of their schema:
// the load ignores them, so a misspelt field name would otherwise change nothing
// silently. Unknown classes are left to the load (a per-entry error).
func (c *Console) unknownKeys(ctx context.Context, entries []*model.Entry) []string {
	header := map[string]bool{"classname": true, "keyname": true, "displayname": true, "is_enabled": true}
	var out []string
	for _, e := range entries {
		cls, key := e.Key()
		if cls == "_schema" || cls == "_permission" {
			continue
		}
		sch, err := c.db.Schema(ctx, cls)
		if err != nil {
			continue
		}
		var bad []string
		for _, k := range e.Order {
			if header[k] || strings.HasPrefix(k, "_") || (cls == "_user" && k == "login") || sch.Field(k) != nil {
				continue
			}
			bad = append(bad, k)
		}
		if len(bad) > 0 {
			out = append(out, fmt.Sprintf("entry %d (%s %s): %s not a field of %s and would be ignored",
				e.Index, clip.Text(cls), clip.Text(key), clip.Text(strings.Join(bad, ", "))+map[bool]string{true: " is", false: " are"}[len(bad) == 1], clip.Text(cls)))
		}
		if len(out) >= 100 {
			break
		}
	}
	return out
}
