package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// eventPeople: evreader writes event rules and reads data; evadmin writes event rules
// but reads no data; sched writes schedules; plain reads and writes data but holds
// neither permission; dataadmin holds p_data_admin, which does not reach event rules
// (they hold credentials, as API keys do).
const eventPeople = `
- {classname: _user, keyname: evreader, displayname: Eve Reader, password: evreader-pass-1}
- {classname: _role, keyname: event_readers, permissions: [p_data_access, p_data_read, p_event_admin], users: [evreader]}
- {classname: _user, keyname: evadmin, password: evadmin-pass-1}
- {classname: _user, keyname: sched, password: sched-pass-1}
- {classname: _user, keyname: plain, password: plain-pass-1}
- {classname: _user, keyname: dataadmin, password: dataadmin-pass-1}
- {classname: _role, keyname: event_admins, permissions: [p_data_access, p_event_admin], users: [evadmin]}
- {classname: _role, keyname: schedulers, permissions: [p_data_access, p_data_read, p_pipeline_admin, p_pipeline_run], users: [sched]}
- {classname: _role, keyname: plain_users, permissions: [p_data_access, p_data_read, p_data_create, p_data_update], users: [plain]}
- {classname: _role, keyname: data_admins, permissions: [p_data_access, p_data_admin], users: [dataadmin]}
- {classname: _schema, keyname: site, displayname: Sites, location: {displayname: Location, dataformat: string}}
- {classname: _pipeline, keyname: tag, content: "- field_noop: ''"}
`

// TestEventRuleForm creates and edits an event rule through the console's data pages:
// the actions are checkboxes, the condition has an example, the secret is write-only
// (never shown back, kept when left empty) and the author is written by the store,
// whatever the form posts.
func TestEventRuleForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(eventPeople)
	ev := e.browser()
	ev.signIn("evadmin", "evadmin-pass-1")
	p := ev.get("/")
	want(t, p, http.StatusOK, `href="/data/private/_eventrule/"`, "Event rules")
	lacks(t, p, `href="/data/private/_schedule/"`)

	b := e.browser()
	b.signIn("evreader", "evreader-pass-1")

	p = b.get("/data/private/_eventrule/?do=new")
	want(t, p, http.StatusOK, `id="f_actions_create"`, `id="f_actions_rename"`, `type="checkbox" name="f_actions" id="f_actions_update" value="update"`,
		"Example: <code>[field_match, env, &#39;^prod$&#39;]</code>", "[changed, FIELD]",
		`type="password" id="f_secret"`, "No value is stored. Write-only", `id="f_author"`, "written when saved")
	lacks(t, p, `name="f_author"`, `name="f_author_id"`)

	const secret = "hook-secret-0123456789"
	form := url.Values{"csrf": {b.csrf()}, "keyname": {"site_hook"}, "displayname": {"Site hook"}, "is_enabled": {"false", "true"},
		"f_schemas": {"site", ""}, "f_actions": {"create", "update"}, "f_condition": {"[changed, location]"},
		"f_webhook_url": {"http://192.0.2.10/hook"}, "f_secret": {secret}, "f_author": {"user:mallory"}}
	p = b.post("/data/private/_eventrule/?do=new", form)
	if p.status != http.StatusSeeOther || p.loc != "/data/private/_eventrule/site_hook/?done=created" {
		t.Fatalf("create: %d %q\n%s", p.status, p.loc, p.body)
	}
	ctx := context.Background()
	in, err := e.db.Instance(ctx, "_eventrule", "site_hook")
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Data["author"]; got != "user:evreader" {
		t.Fatalf("author %v, want user:evreader (the store writes it, not the form)", got)
	}
	stored, _ := in.Data["secret"].(string)
	if stored == "" || stored == secret {
		t.Fatalf("secret stored as %q: want it kept, never as typed", stored)
	}
	if got := strings.Join(texts(in.Data["actions"]), ","); got != "create,update" {
		t.Fatalf("actions %q", got)
	}

	p = b.get("/data/private/_eventrule/site_hook/")
	want(t, p, http.StatusOK, `id="v-secret"`, "set (never shown)", "user:evreader", "[changed, location]")
	lacks(t, p, secret, stored)
	p = b.get("/data/private/_eventrule/site_hook/?do=edit")
	want(t, p, http.StatusOK, "A value is stored. Write-only", `id="f_actions_create" value="create" checked`, `id="f_author">user:evreader`)
	lacks(t, p, secret, stored, `id="f_actions_delete" value="delete" checked`)

	// Another address with the secret left empty is refused: the stored secret was
	// given for the old address.
	form = url.Values{"csrf": {b.csrf()}, "displayname": {"Site hook"}, "is_enabled": {"false", "true"},
		"f_schemas": {"site"}, "f_actions": {"create", "update", "delete"}, "f_webhook_url": {"http://192.0.2.10/other"}, "f_secret": {""}}
	p = b.post("/data/private/_eventrule/site_hook/?do=edit", form)
	want(t, p, http.StatusBadRequest, "changing webhook_url needs a new secret")
	// Saved with the secret left empty: the stored secret stays.
	form = url.Values{"csrf": {b.csrf()}, "displayname": {"Site hook"}, "is_enabled": {"false", "true"},
		"f_schemas": {"site"}, "f_actions": {"create", "update", "delete"}, "f_webhook_url": {"http://192.0.2.10/hook"}, "f_secret": {""}}
	p = b.post("/data/private/_eventrule/site_hook/?do=edit", form)
	if p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", p.status, p.body)
	}
	in, err = e.db.Instance(ctx, "_eventrule", "site_hook")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := in.Data["secret"].(string); got != stored {
		t.Fatalf("the secret changed on a save that left it empty: %q, was %q", got, stored)
	}
	if got := strings.Join(texts(in.Data["actions"]), ","); got != "create,update,delete" {
		t.Fatalf("actions after edit %q", got)
	}
	if _, ok := in.Data["condition"]; ok {
		t.Fatalf("condition kept after it was emptied: %v", in.Data["condition"])
	}
}

// TestEventRulePagesNeedPermission: event rules are read and written with
// p_event_admin only (p_data_admin does not reach them); schedules with
// p_pipeline_admin for writes. The sidebar links only what the user may open.
func TestEventRulePagesNeedPermission(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(eventPeople)
	e.load(`- {classname: _eventrule, keyname: r1, schemas: [site], webhook_url: "http://192.0.2.10/x", secret: s3cr3t-value}`)
	for _, who := range []string{"plain", "dataadmin"} {
		b := e.browser()
		b.signIn(who, who+"-pass-1")
		lacks(t, b.get("/"), `href="/data/private/_eventrule/"`)
		want(t, b.get("/data/private/_eventrule/"), http.StatusForbidden, "p_event_admin")
		want(t, b.get("/data/private/_eventrule/r1/"), http.StatusForbidden, "p_event_admin")
		want(t, b.get("/data/private/_eventrule/?do=new"), http.StatusForbidden, "p_event_admin")
		p := b.post("/data/private/_eventrule/?do=new", url.Values{"csrf": {b.csrf()}, "keyname": {"r2"}, "f_schemas": {"site"},
			"f_webhook_url": {"http://192.0.2.10/x"}, "f_secret": {"s3cr3t-value"}})
		want(t, p, http.StatusForbidden, "p_event_admin")
	}
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = '_eventrule'"); n != 1 {
		t.Fatalf("%d event rules, want 1", n)
	}

	b := e.browser()
	b.signIn("sched", "sched-pass-1")
	p := b.get("/")
	// The dashboard's Automation tile opens the class; the sidebar's Schedules, the
	// schedules tool (its page links the class).
	want(t, p, http.StatusOK, `href="/data/private/schedule/"`, `href="/data/private/_schedule/"`)
	lacks(t, p, `href="/data/private/_eventrule/"`)
	want(t, b.get("/data/private/schedule/"), http.StatusOK, `href="/data/private/_schedule/?do=new"`)
	p = b.get("/data/private/_schedule/?do=new")
	want(t, p, http.StatusOK, `<select id="f_missed" name="f_missed">`, "<option selected>run_once</option><option>skip</option>", "@every 2h", `id="f_author"`)
	lacks(t, p, `name="f_author"`, `name="f_author_id"`)
}

// texts is a stored list's items as strings.
func texts(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, it := range l {
			s, _ := it.(string)
			out = append(out, s)
		}
	}
	return out
}
