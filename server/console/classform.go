package console

import (
	"slices"

	"dataservice/store"
	"dataservice/store/model"
)

// fieldHint is how the create and edit forms show a field of a built-in class whose
// stored dataformat says less than the class's rules: a list of fixed words, an
// example of a condition. The store validates the values whatever the form offers.
type fieldHint struct {
	// Choices are the values the field takes: checkboxes for a multi-valued field, a
	// select otherwise.
	Choices []string
	// Example is shown under the input (and as a text area's placeholder).
	Example string
	// Help replaces the field's description.
	Help string
}

// eventActions are the actions an event rule may watch.
var eventActions = []string{"create", "update", "delete", "enable", "disable", "rename"}

// classHints are the hints of the built-in classes' fields, by class and field.
var classHints = map[string]map[string]fieldHint{
	"_eventrule": {
		"schemas": {Help: "The schemas whose instances the rule watches, one per input."},
		"actions": {Choices: eventActions, Help: "None ticked: every action."},
		"condition": {Help: "Optional: a checker of the pipeline rule language, as in set_condition without the condition's name, " +
			"plus [changed, FIELD]; evaluated on the new state (the old one for a delete). Empty: every change matches.",
			Example: "[field_match, env, '^prod$']"},
		"webhook_url": {Help: "An http:// or https:// address that receives a signed POST per event. A webhook URL, a pipeline or both."},
		"pipeline":    {Help: "The keyname of a pipeline run on the changed instance, with the rule's author's permissions."},
	},
	"_schedule": {
		"cron": {Help: "5 fields (minute hour day month weekday), 6 with seconds first, or a descriptor.",
			Example: "0 3 * * *   (every day at 03:00) · */30 * * * * *   (every 30 s) · @every 2h · @hourly"},
		"timezone": {Help: "An IANA time zone name, e.g. Europe/Paris; empty: UTC."},
		"missed": {Choices: []string{"run_once", "skip"},
			Help: "After downtime: run once for the runs that fell due (run_once, also when empty), or skip them (skip)."},
		"schemas":  {Help: "The schemas the pipeline runs over, one per input."},
		"pipeline": {Help: "The keyname of the pipeline to run."},
	},
}

// hintOf is the hint of sch's field f (the zero hint for most fields).
func hintOf(sch *model.Schema, f *model.Field) fieldHint {
	return classHints[sch.Keyname][f.Keyname]
}

// readOnlyField reports whether the forms show f without an input: the author of an
// event rule or schedule and its id are written by the store (the last writer), never
// by a form.
func readOnlyField(sch *model.Schema, f *model.Field) bool {
	return store.IsAuthoredClass(sch.Keyname) && (f.Keyname == store.AuthorField || f.Keyname == store.AuthorIDField)
}

// secretHelp is what a form says under a secret's input: the console never shows a
// secret, and an empty input keeps it.
func secretHelp(f *model.Field, stored bool) string {
	s := "Write-only: never shown, not even here. Leave empty to keep the stored value; type a new one to replace it."
	if f.DataformatExt == "encrypted" {
		s = "Write-only: stored encrypted and never shown again. Leave empty to keep the stored secret; type a new one to replace it."
	}
	if stored {
		return "A value is stored. " + s
	}
	return "No value is stored. " + s
}

// choice is one checkbox of a multi-valued field with fixed values.
type choice struct {
	Value   string
	Checked bool
}

// choicesOf are the checkboxes of a field with fixed values holding vals: every
// choice, then any stored value that is none of them (kept ticked, so saving the form
// does not drop it silently; the store names it if it is invalid).
func choicesOf(fixed, vals []string) []choice {
	out := make([]choice, 0, len(fixed))
	for _, c := range fixed {
		out = append(out, choice{Value: c, Checked: slices.Contains(vals, c)})
	}
	for _, v := range vals {
		if v != "" && !slices.Contains(fixed, v) {
			out = append(out, choice{Value: v, Checked: true})
		}
	}
	return out
}

// stored completes an edit form of in with what the posted values lack: whether each
// secret holds a value (said, never shown) and the read-only fields' stored values.
func (d *formData) stored(sch *model.Schema, in *store.Instance) {
	for _, ff := range d.Fields {
		f := sch.Field(ff.Name)
		switch {
		case f == nil:
		case ff.Widget == "secret":
			v, _ := in.Data[f.Keyname].(string)
			ff.Help = secretHelp(f, v != "")
		case ff.Widget == "readonly":
			ff.Values = nil
			if v, ok := in.Data[f.Keyname]; ok && v != nil {
				ff.Values = []string{text(v)}
			}
		}
	}
}
