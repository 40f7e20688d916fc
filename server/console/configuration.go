package console

import (
	"net/http"
	"strings"

	"dataservice/store"
	"dataservice/store/model"
)

// confViewer: the configuration page is open to p_conf_view and p_conf_admin, as the
// API's GET /api/conf/ (which also wants p_api_conf, the API's own gate).
func confViewer(auth *model.Auth) bool { return auth.Has("p_conf_view") || auth.Has("p_conf_admin") }

type confRow struct {
	store.ConfigEntry
	// Input is what the form shows: the stored value, or what the user typed.
	Input, Error string
}

type configurationData struct {
	Rows     []confRow
	CanAdmin bool
	Error    string
}

// configurationTool: /data/private/configuration/ — every entry with its description,
// default and value; with p_conf_admin a form changes them, validated as the API does:
// one invalid value refuses the whole form, naming the reason next to the field.
func (c *Console) configurationTool(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	d := configurationData{CanAdmin: q.auth.Has("p_conf_admin")}
	if r.Method == http.MethodPost && !d.CanAdmin {
		c.forbidden(w, r, q, "p_conf_admin")
		return
	}
	entries, err := c.db.Config(ctx)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	for _, e := range entries {
		d.Rows = append(d.Rows, confRow{ConfigEntry: e, Input: e.Value})
	}
	if r.Method != http.MethodPost {
		c.render(w, r, q, http.StatusOK, "configuration", "Configuration", d)
		return
	}
	updates := map[string]string{}
	bad := false
	for i := range d.Rows {
		row := &d.Rows[i]
		vals, posted := r.PostForm["v_"+row.Keyname]
		if !posted {
			continue // not on the form: unchanged
		}
		v := vals[0]
		if isIntConfig(row.Keyname) {
			v = strings.TrimSpace(v)
		}
		row.Input = v
		if v == row.Value {
			continue
		}
		if err := store.ValidateConfig(row.Keyname, v); err != nil {
			row.Error = strings.TrimPrefix(store.ErrorMessage(err), "configuration "+row.Keyname+": ")
			bad = true
			continue
		}
		updates[row.Keyname] = v
	}
	if bad {
		d.Error = "Nothing was saved: correct the values marked below."
		c.render(w, r, q, http.StatusBadRequest, "configuration", "Configuration", d)
		return
	}
	if len(updates) == 0 {
		http.Redirect(w, r, "/data/private/configuration/?done=unchanged", http.StatusSeeOther)
		return
	}
	if err := c.db.SetConfig(ctx, updates); err != nil {
		if store.Aborts(err) {
			c.fail(w, r, q, err)
			return
		}
		d.Error = "Nothing was saved: " + store.ErrorMessage(err)
		c.render(w, r, q, http.StatusBadRequest, "configuration", "Configuration", d)
		return
	}
	keys := make([]string, 0, len(updates))
	for k := range updates {
		keys = append(keys, k)
	}
	c.log.Info("configuration changed", "user", q.user.Keyname, "keys", strings.Join(keys, ","))
	http.Redirect(w, r, "/data/private/configuration/?done=updated", http.StatusSeeOther)
}

func isIntConfig(key string) bool {
	for _, d := range store.ConfigDefs {
		if d.Keyname == key {
			return d.Int
		}
	}
	return false
}
