package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
)

const confData = `
- {classname: _user, keyname: viewer, password: viewer-pass-1}
- {classname: _user, keyname: confadmin, password: confadmin-pass-1}
- {classname: _user, keyname: plain, password: plain-pass-1}
- {classname: _role, keyname: conf_viewers, permissions: [p_data_access, p_conf_view], users: [viewer]}
- {classname: _role, keyname: conf_admins, permissions: [p_data_access, p_conf_admin], users: [confadmin]}
- {classname: _role, keyname: plain, permissions: [p_data_access, p_data_read], users: [plain]}
`

func TestConfigurationPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.load(confData)
	const path = "/data/private/configuration/"

	// p_conf_view: every entry with description, default and value, read-only.
	v := e.browser()
	v.signIn("viewer", "viewer-pass-1")
	p := v.get(path)
	want(t, p, 200, `id="conf-readonly"`, `id="conf-DATA_MAX_SIZE"`, "largest page size of instance lists", "<code>500</code>", `<span id="v-DATA_MAX_SIZE">500</span>`)
	lacks(t, p, "<input id=\"v-", `id="conf-save"`, `id="conf-form"`)
	// The revision retention, with what 0 means.
	want(t, p, 200, `id="conf-REVISION_RETENTION_DAYS"`, "days revisions are kept (0 = forever)", `<span id="v-REVISION_RETENTION_DAYS">0</span>`)
	want(t, v.get("/"), 200, `href="/data/private/configuration/"`)
	want(t, v.get(path+"DATA_MAX_SIZE/"), http.StatusNotFound) // a one-page tool
	tok := v.csrf()
	p = v.post(path, url.Values{"csrf": {tok}, "v_DATA_MAX_SIZE": {"600"}})
	want(t, p, http.StatusForbidden)
	if got := e.db.ConfigValue(ctx, "DATA_MAX_SIZE"); got != "500" {
		t.Fatalf("a p_conf_view user changed DATA_MAX_SIZE to %s", got)
	}

	// Neither permission: no link, 403.
	pl := e.browser()
	pl.signIn("plain", "plain-pass-1")
	want(t, pl.get(path), http.StatusForbidden)
	lacks(t, pl.get("/"), `href="/data/private/configuration/"`)

	// p_conf_admin: a form; an invalid value is refused next to its field and nothing
	// changes, not even the valid values posted with it.
	a := e.browser()
	a.signIn("confadmin", "confadmin-pass-1")
	atok := a.csrf()
	want(t, a.get(path), 200, `id="conf-form"`, `<input id="v-DATA_MAX_SIZE" name="v_DATA_MAX_SIZE" value="500"`, `id="conf-save"`)
	p = a.post(path, url.Values{"csrf": {atok}, "v_DATA_MAX_SIZE": {"600"}, "v_QUEUE_MAX": {"0"}, "v_CSV_DELIMITER": {"ab"}, "v_GLOBAL_APPNAME": {"Lab"}})
	want(t, p, http.StatusBadRequest, `id="conf-error"`, "Nothing was saved",
		`<p class="field-error" id="error-QUEUE_MAX">0 is outside 1..1000000</p>`,
		`id="error-CSV_DELIMITER">must be exactly one character`,
		`value="600"`, `value="0"`, `value="ab"`) // the form keeps what was typed
	lacks(t, p, `id="error-DATA_MAX_SIZE"`, `id="error-GLOBAL_APPNAME"`)
	for k, want := range map[string]string{"DATA_MAX_SIZE": "500", "QUEUE_MAX": "1000", "CSV_DELIMITER": ";", "GLOBAL_APPNAME": "dataservice"} {
		if got := e.db.ConfigValue(ctx, k); got != want {
			t.Fatalf("%s changed to %q by a refused form", k, got)
		}
	}
	// Without the CSRF token: refused.
	want(t, a.post(path, url.Values{"v_DATA_MAX_SIZE": {"600"}}), http.StatusForbidden, "CSRF")
	// Valid values are saved.
	p = a.post(path, url.Values{"csrf": {atok}, "v_DATA_MAX_SIZE": {" 600 "}, "v_GLOBAL_APPNAME": {"Lab"}})
	if p.status != http.StatusSeeOther || p.loc != path+"?done=updated" {
		t.Fatalf("save: %d %s\n%s", p.status, p.loc, p.body)
	}
	if e.db.ConfigValue(ctx, "DATA_MAX_SIZE") != "600" || e.db.ConfigValue(ctx, "GLOBAL_APPNAME") != "Lab" {
		t.Fatal("valid values not saved")
	}
	want(t, a.get(path+"?done=updated"), 200, "Saved.", `value="600"`, "<title>Configuration · Lab</title>")
	p = a.post(path, url.Values{"csrf": {atok}, "v_DATA_MAX_SIZE": {"600"}})
	if p.status != http.StatusSeeOther || p.loc != path+"?done=unchanged" {
		t.Fatalf("unchanged save: %d %s", p.status, p.loc)
	}
	// The viewer sees the new value, still read-only.
	want(t, v.get(path), 200, `<span id="v-DATA_MAX_SIZE">600</span>`)
}
