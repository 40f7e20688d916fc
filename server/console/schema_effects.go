package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"dataservice/store/model"
)

// fieldEffects says what a field change does to the existing instances of sch: old is
// the field's definition before (nil: the field is added), next after (nil: it is
// deleted). The counts come from one statement each (CountInstances reads a maintained
// number, FieldValueCount counts the rows holding a value), so the preview of a change
// to a class of a million instances costs a count. What it states is what the store
// does: a schema write touches no instance, except a field's deletion, which removes
// the field's values from every instance in the same transaction (store deleteField).
func (c *Console) fieldEffects(r *http.Request, sch *model.Schema, old, next *model.Field) ([]string, error) {
	ctx := r.Context()
	total, err := c.db.CountInstances(ctx, sch.Keyname)
	if err != nil {
		return nil, err
	}
	field := old
	if next != nil {
		field = next
	}
	name := "`" + field.Keyname + "`"
	of := func(n int) string {
		if n == 1 {
			return "1 " + sch.Keyname + " instance"
		}
		return thousands(n) + " " + sch.Keyname + " instances"
	}
	held := 0
	if old != nil && old.Dataformat != "external" {
		if held, err = c.db.FieldValueCount(ctx, sch.Keyname, old.Keyname); err != nil {
			return nil, err
		}
	}
	if next == nil {
		if old.Dataformat == "external" {
			return []string{fmt.Sprintf("Deleting %s clears nothing: an external field is computed, never stored.", name)}, nil
		}
		return []string{
			fmt.Sprintf("Deleting %s clears it on %s (of %s).", name, of(held), thousands(total)),
			"The values are removed in the same transaction as the definition, with no revision per instance: they cannot be read back, and a field added later under the same name starts empty.",
		}, nil
	}
	out := []string{"No instance is written: only the definition changes."}
	if next.Dataformat == "external" {
		out = append(out, fmt.Sprintf("%s is computed from the instance a single-valued schema field references: nothing is stored for it.", name))
		return out, nil
	}
	if old == nil {
		if total > 0 {
			out = append(out, fmt.Sprintf("The %s existing now get no value for %s.", of(total), name))
		}
		if next.Default != nil {
			out = append(out, "Its default is given only to instances created from now on.")
		}
		if next.CardinalMin > 0 && total > 0 {
			out = append(out, fmt.Sprintf("It needs at least %d value(s): updating any of the %s fails until the update gives it a value.", next.CardinalMin, of(total)))
		}
		return out, nil
	}
	if old.Dataformat != next.Dataformat || old.DataformatExt != next.DataformatExt || old.CardinalMax != next.CardinalMax {
		if held > 0 {
			out = append(out, fmt.Sprintf("%s hold a value for %s and keep it as stored: a stored value is checked against the new definition only when a write gives the field a new value.", of(held), name))
		} else {
			out = append(out, fmt.Sprintf("No instance holds a value for %s.", name))
		}
	}
	if next.CardinalMin > old.CardinalMin && next.CardinalMin > 0 {
		if missing := total - held; missing > 0 {
			out = append(out, fmt.Sprintf("%s have no value for %s: updating one fails until the update gives it one.", of(missing), name))
		}
		if next.CardinalMin > 1 && held > 0 {
			out = append(out, fmt.Sprintf("Updating an instance holding fewer than %d values for %s fails the same way.", next.CardinalMin, name))
		}
	}
	if !model.SameJSONValue(old.Default, next.Default) {
		out = append(out, "The new default is given only to instances created from now on.")
	}
	return out, nil
}

// fieldDependents says what else reads the field name of sch, which a deletion leaves
// without it: the external fields (of the schemas auth may read) that read it, either
// as the field they follow or as the field they show, and the dataviews of sch that
// list it (their lists leave the column out). A field keeps no count of such readers,
// so they are found here, from the definitions.
func (c *Console) fieldDependents(ctx context.Context, auth *model.Auth, sch *model.Schema, name string) ([]string, error) {
	names, err := c.db.SchemaNames(ctx)
	if err != nil {
		return nil, err
	}
	var externals []string
	for _, n := range names {
		s, err := c.db.Schema(ctx, n)
		if err != nil {
			return nil, err
		}
		if !model.CanRead(auth, s) {
			continue
		}
		for _, f := range s.Fields {
			ext := strings.Fields(f.DataformatExt)
			if f.Dataformat != "external" || len(ext) < 2 {
				continue
			}
			follows := s.Keyname == sch.Keyname && ext[0] == name
			shows := ext[1] == name
			if shows {
				parent := s.Field(ext[0])
				shows = parent != nil && parent.Dataformat == "schema" && !parent.IsMulti() && refTarget(parent) == sch.Keyname
			}
			if follows || shows {
				externals = append(externals, "`"+s.Keyname+"."+f.Keyname+"`")
			}
		}
	}
	var out []string
	if len(externals) > 0 {
		out = append(out, fmt.Sprintf("The external field(s) %s read it: they show no value once it is deleted.", strings.Join(externals, ", ")))
	}
	if dv, err := c.db.Schema(ctx, "_dataview"); err == nil && model.CanRead(auth, dv) {
		views, _ := c.dataviews(ctx, sch, "")
		var listing []string
		for _, v := range views {
			if v.Keyname != "_all" && slices.Contains(v.Columns, name) {
				listing = append(listing, "`"+v.Keyname+"`")
			}
		}
		if len(listing) > 0 {
			out = append(out, fmt.Sprintf("The dataview(s) %s list it: their lists leave the column out (their definitions keep its name).", strings.Join(listing, ", ")))
		}
	}
	return out, nil
}
