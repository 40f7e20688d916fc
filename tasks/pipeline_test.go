package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// outcomeKinds are the host kinds of the outcome test, in the order the hosts cycle
// through them; h00000 is a noop host, the target of the colliding renames.
var outcomeKinds = []string{"noop", "init", "keep", "upd", "del", "ena", "dis", "disc",
	"ren", "renupd", "etoint", "evalid", "eclass", "ecoll", "ecollupd", "off", "eaction", "ebool"}

// outcomePipeline gives each kind of host its outcome (discarded, unchanged, deleted,
// disabled, enabled, updated, renamed, or an error of each kind).
const outcomePipeline = `
- set_condition: [noop, field_match, kind, '^noop$']
- field_set: [noop, _action, noop]
- set_condition: [init, field_match, kind, '^init$']
- field_set: [init, _action, init]
- set_condition: [upd, field_match, kind, '^upd$']
- field_upper: [upd, name, tags]
- field_set: [upd, port, '8080']
- field_set: [upd, displayname, Updated]
- set_condition: [keep, field_match, kind, '^keep$']
- field_set: [keep, _scratch, '1']
- field_set: [keep, not_a_field, x]
- set_condition: [del, field_match, kind, '^del$']
- field_set: [del, _action, delete]
- set_condition: [ena, field_match, kind, '^ena$']
- field_set: [ena, _action, enable]
- set_condition: [dis, field_match, kind, '^dis$']
- field_set: [dis, _action, disable]
- set_condition: [disc, field_match, kind, '^disc$']
- discard: disc
- set_condition: [ren, field_match, kind, '^ren']
- field_append: [ren, keyname, '-r']
- set_condition: [renupd, field_match, kind, '^renupd$']
- field_set: [renupd, note, renamed]
- set_condition: [etoint, field_match, kind, '^etoint$']
- field_toint: [etoint, name]
- set_condition: [evalid, field_match, kind, '^evalid$']
- field_set: [evalid, port, abc]
- set_condition: [eclass, field_match, kind, '^eclass$']
- field_set: [eclass, classname, rack]
- set_condition: [ecoll, field_match, kind, '^ecoll']
- field_set: [ecoll, keyname, h00000]
- set_condition: [ecollupd, field_match, kind, '^ecollupd$']
- field_set: [ecollupd, note, changed]
- set_condition: [off, field_match, kind, '^off$']
- field_set: [off, is_enabled, 'off']
- set_condition: [eaction, field_match, kind, '^eaction$']
- field_set: [eaction, _action, frob]
- set_condition: [ebool, field_match, kind, '^ebool$']
- field_set: [ebool, is_enabled, maybe]
`

// outcomeHosts builds n hosts cycling through outcomeKinds; "ena" hosts start disabled.
func outcomeHosts(n int) (rows []row, kindOf map[string]string) {
	kindOf = map[string]string{}
	for i := 0; i < n; i++ {
		kind := outcomeKinds[i%len(outcomeKinds)]
		key := fmt.Sprintf("h%05d", i)
		kindOf[key] = kind
		rows = append(rows, row{Keyname: key, Enabled: kind != "ena", Data: map[string]any{
			"name": fmt.Sprintf("host-%05d", i), "kind": kind, "port": 80, "note": "n", "tags": []string{"a", "b"}}})
	}
	return rows, kindOf
}

func TestPipelineOutcomes(t *testing.T) {
	t.Parallel()
	const n = 3600
	db := newDB(t)
	rows, kindOf := outcomeHosts(n)
	insertRows(t, db, "host", rows)
	insertRows(t, db, "site", []row{{Keyname: "s1", Enabled: false, Data: map[string]any{"city": "x"}}})
	addPipeline(t, db, "outcomes", outcomePipeline, "")
	r := newRunner(t, db, tasks.Options{})

	before := dumpData(t, db)
	hostsBefore := instanceRows(t, db, "host")
	revisionsBefore := queryInt(t, db, "SELECT count(*) FROM revisions")

	per := int64(n / len(outcomeKinds))
	wantCounts := counts(&tasks.Result{Scanned: n, Updated: 4 * per, Deleted: per, Disabled: per, Enabled: per,
		Unchanged: 3 * per, Discarded: per, Errors: 7 * per})

	dry := mustSucceed(t, runPipeline(t, r, "outcomes", true, "host"))
	t.Run("dry run counts every outcome", func(t *testing.T) {
		if got, want := counts(dry), wantCounts; got != want {
			t.Fatalf("dry run counts:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("dry run changes nothing", func(t *testing.T) {
		after := dumpData(t, db)
		for _, table := range dataTables {
			if after[table] != before[table] {
				t.Errorf("table %s changed by a dry run", table)
			}
		}
	})

	h := submit(t, r, tasks.Params{Pipeline: "outcomes", Schemas: []string{"host"}})
	task := runOne(t, r, h)
	res := mustSucceed(t, task)
	author := "task:" + h

	t.Run("real run counts every outcome", func(t *testing.T) {
		if got, want := counts(res), wantCounts; got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
		if got, want := task.Progress.Done, int64(n); got != want {
			t.Errorf("progress done %d, want %d", got, want)
		}
		if got, want := task.Progress.Total, int64(n); got != want {
			t.Errorf("progress total %d, want %d", got, want)
		}
		if got, want := task.Progress.Percent, 100.0; got != want {
			t.Errorf("progress percent %v, want %v", got, want)
		}
	})
	t.Run("dry run planned the same changes and errors", func(t *testing.T) {
		for name, pair := range map[string][2]any{"changes": {dry.Changes, res.Changes}, "error_messages": {dry.ErrorMessages, res.ErrorMessages}} {
			d, _ := json.Marshal(pair[0])
			real, _ := json.Marshal(pair[1])
			if string(d) != string(real) {
				t.Errorf("%s differ:\n dry %s\nreal %s", name, d, real)
			}
		}
	})
	t.Run("changes hold the first 100 with field old and new values", func(t *testing.T) {
		if got, want := len(res.Changes), 100; got != want {
			t.Fatalf("%d changes listed, want %d", got, want)
		}
		byKey := map[string]tasks.Change{}
		for _, c := range res.Changes {
			byKey[c.Keyname] = c
		}
		upd := byKey["h00003"]
		if got, want := upd.Action, "update"; got != want {
			t.Fatalf("h00003 change action %q, want %q", got, want)
		}
		fields, _ := json.Marshal(upd.Fields)
		if got, want := string(fields), `{"name":{"old":"host-00003","new":"HOST-00003"},"port":{"old":80,"new":8080},"tags":{"old":["a","b"],"new":["A","B"]}}`; got != want {
			t.Errorf("h00003 fields:\n got %s\nwant %s", got, want)
		}
		for key, want := range map[string]string{"h00004": "delete", "h00005": "enable", "h00006": "disable"} {
			if got := byKey[key].Action; got != want {
				t.Errorf("%s change action %q, want %q", key, got, want)
			}
		}
		ren := byKey["h00008"]
		if got, want := ren.Action+" "+ren.NewKey, "update h00008-r"; got != want {
			t.Errorf("h00008 change %q, want %q", got, want)
		}
		if len(ren.Fields) != 0 {
			t.Errorf("h00008 change fields %v, want none", ren.Fields)
		}
		renupd, _ := json.Marshal(byKey["h00009"].Fields)
		if got, want := byKey["h00009"].NewKey+" "+string(renupd), `h00009-r {"note":{"old":"n","new":"renamed"}}`; got != want {
			t.Errorf("h00009 change %s, want %s", got, want)
		}
		for key, kind := range kindOf {
			unchanged := map[string]bool{"noop": true, "init": true, "keep": true, "disc": true, "etoint": true,
				"evalid": true, "eclass": true, "ecoll": true, "ecollupd": true, "eaction": true, "ebool": true}
			if _, listed := byKey[key]; listed && unchanged[kind] {
				t.Errorf("%s (%s) listed as a change", key, kind)
			}
		}
	})
	t.Run("each failed entry has a message naming it and its reason", func(t *testing.T) {
		if got, want := len(res.ErrorMessages), 100; got != want {
			t.Fatalf("%d error messages, want %d (errors %d)", got, want, res.Errors)
		}
		want := map[string]string{"etoint": "field_toint", "evalid": "field port", "eclass": `"classname" must not change`,
			"ecoll": `host "h00000" already exists`, "ecollupd": `host "h00000" already exists`,
			"eaction": `unknown _action "frob"`, "ebool": `is_enabled "maybe" is not a boolean`}
		seen := map[string]int{}
		for _, m := range res.ErrorMessages {
			key, _, _ := strings.Cut(strings.TrimPrefix(m, "host "), ":")
			kind := kindOf[key]
			if !strings.Contains(m, want[kind]) || want[kind] == "" {
				t.Errorf("message %q (kind %s) does not contain %q", m, kind, want[kind])
			}
			seen[kind]++
		}
		for kind := range want {
			if seen[kind] == 0 {
				t.Errorf("no message for kind %s", kind)
			}
		}
	})

	hostsAfter := instanceRows(t, db, "host")
	t.Run("each instance has its outcome and failed ones are untouched", func(t *testing.T) {
		for key, kind := range kindOf {
			old, now, kept := hostsBefore[key], hostsAfter[key], false
			if _, ok := hostsAfter[key]; ok {
				kept = true
			}
			switch kind {
			case "noop", "init", "keep", "disc", "etoint", "evalid", "eclass", "ecoll", "ecollupd", "eaction", "ebool":
				if now != old {
					t.Fatalf("%s (%s) changed:\nbefore %+v\n after %+v", key, kind, old, now)
				}
			case "del":
				if kept {
					t.Fatalf("%s (del) still present: %+v", key, now)
				}
			case "ren", "renupd":
				if kept {
					t.Fatalf("%s (%s) still present under its old keyname", key, kind)
				}
				in := testkit.Instance(t, db, "host", key+"-r")
				wantNote := map[string]string{"ren": "n", "renupd": "renamed"}[kind]
				if got := fmt.Sprintf("%v %v", in.Data["note"], in.Data["port"]); got != wantNote+" 80" {
					t.Fatalf("%s-r note and port %q, want %q", key, got, wantNote+" 80")
				}
				if got, want := hostsAfter[key+"-r"].ID, old.ID; got != want {
					t.Fatalf("%s-r has id %d, want the renamed row's %d", key, got, want)
				}
			case "upd":
				in := testkit.Instance(t, db, "host", key)
				got := fmt.Sprintf("%v %T(%v) %v %v %v %s", in.Data["name"], in.Data["port"], in.Data["port"], in.Data["tags"], in.Data["note"], in.IsEnabled, in.Displayname)
				want := fmt.Sprintf("%s int64(8080) [A B] n true Updated", strings.ToUpper("host-"+key[1:]))
				if got != want {
					t.Fatalf("%s (upd): %s, want %s", key, got, want)
				}
				if in.UpdatedAt == testkit.OldTime {
					t.Fatalf("%s (upd): updated_at not changed", key)
				}
			case "ena", "dis", "off":
				in := testkit.Instance(t, db, "host", key)
				if got, want := in.IsEnabled, kind == "ena"; got != want {
					t.Fatalf("%s (%s): is_enabled %v, want %v", key, kind, got, want)
				}
				if got, want := now.Data, old.Data; got != want {
					t.Fatalf("%s (%s): data %s, want %s", key, kind, got, want)
				}
			default:
				t.Fatalf("kind %s not checked", kind)
			}
		}
		if got, want := len(hostsAfter), n-int(per); got != want {
			t.Fatalf("%d hosts after the run, want %d", got, want)
		}
	})
	t.Run("revisions name the task as author, one per write", func(t *testing.T) {
		wantActions := map[string]int{"update": 3 * int(per), "delete": int(per), "enable": int(per), "disable": int(per), "rename": 2 * int(per)}
		for action, want := range wantActions {
			if got := queryInt(t, db, "SELECT count(*) FROM revisions WHERE author = ? AND action = ?", author, action); got != want {
				t.Errorf("%s revisions by %s: %d, want %d", action, author, got, want)
			}
		}
		total := 0
		for _, c := range wantActions {
			total += c
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), revisionsBefore+total; got != want {
			t.Errorf("revisions: %d, want %d", got, want)
		}
		if got, want := testkit.QueryString(t, db, "SELECT before FROM revisions WHERE author = ? AND keyname = 'h00004'", author),
			`{"data":{"kind":"del","name":"host-00004","note":"n","port":80,"tags":["a","b"]},"displayname":"","is_enabled":true,"keyname":"h00004"}`; got != want {
			t.Errorf("delete revision before:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("other schemas are untouched", func(t *testing.T) {
		if got, want := dumpTable(t, db, "schemas"), before["schemas"]; got != want {
			t.Errorf("schemas changed")
		}
		if got, want := testkit.QueryString(t, db, "SELECT string_agg(keyname || is_enabled || CAST(data AS TEXT), ',') FROM instances WHERE classname = 'site'"), `s10{"city":"x"}`; got != want {
			t.Errorf("sites %s, want %s", got, want)
		}
	})
	t.Run("every stored host is still valid", func(t *testing.T) {
		addPipeline(t, db, "nothing", "- field_noop:\n", "")
		revs := queryInt(t, db, "SELECT count(*) FROM revisions")
		check := mustSucceed(t, runPipeline(t, r, "nothing", false, "host"))
		if got, want := counts(check), counts(&tasks.Result{Scanned: int64(len(hostsAfter)), Unchanged: int64(len(hostsAfter))}); got != want {
			t.Fatalf("noop pass over the result:\n got %s\nwant %s\nerrors: %v", got, want, check.ErrorMessages)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), revs; got != want {
			t.Errorf("a noop pass wrote %d revisions", got-want)
		}
	})
}

// renameFixture stores 1000 hosts (even ones of kind "ren") and 250 racks, rack i
// referencing h(4i) through host and h(4i), h(4i+1), h(4i+2) through hosts.
func renameFixture(t *testing.T, db *store.DB) {
	t.Helper()
	var hosts, racks []row
	for i := 0; i < 1000; i++ {
		kind := map[bool]string{true: "ren", false: "keep"}[i%2 == 0]
		hosts = append(hosts, row{Keyname: fmt.Sprintf("h%04d", i), Enabled: true, Data: map[string]any{"kind": kind, "note": "n"}})
	}
	for i := 0; i < 250; i++ {
		racks = append(racks, row{Keyname: fmt.Sprintf("r%03d", i), Enabled: true, Data: map[string]any{
			"host":  fmt.Sprintf("h%04d", 4*i),
			"hosts": []string{fmt.Sprintf("h%04d", 4*i), fmt.Sprintf("h%04d", 4*i+1), fmt.Sprintf("h%04d", 4*i+2)}}})
	}
	insertRows(t, db, "host", hosts)
	insertRows(t, db, "rack", racks)
	addPipeline(t, db, "renamer", `
- set_condition: [ren, field_match, kind, '^ren$']
- field_prefix: [ren, keyname, 'new-']
`, "")
	mustLoad(t, db, `
- classname: _user
  keyname: alice
- classname: _user
  keyname: bob
- classname: _role
  keyname: role_renamer
  permissions: [p_pipeline_run, p_data_read, p_data_update, p_keyname_rename]
  users: [alice]
- classname: _role
  keyname: role_editor
  permissions: [p_pipeline_run, p_data_read, p_data_update]
  users: [bob]
`)
}

func TestPipelineRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("with p_keyname_rename the references follow the renamed hosts", func(t *testing.T) {
		db := newDB(t)
		renameFixture(t, db)
		r := newRunner(t, db, tasks.Options{})
		auth, err := db.UserAuth(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		h := submit(t, r, tasks.Params{Pipeline: "renamer", Schemas: []string{"host"}, Auth: auth, OwnerType: "api", OwnerID: "alice"})
		res := mustSucceed(t, runOne(t, r, h))
		if got, want := counts(res), counts(&tasks.Result{Scanned: 1000, Updated: 500, Unchanged: 500}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s\nerrors %v", got, want, res.ErrorMessages)
		}
		for i := 0; i < 250; i++ {
			in := testkit.Instance(t, db, "rack", fmt.Sprintf("r%03d", i))
			got := fmt.Sprintf("%v %v", in.Data["host"], in.Data["hosts"])
			want := fmt.Sprintf("new-h%04d [new-h%04d h%04d new-h%04d]", 4*i, 4*i, 4*i+1, 4*i+2)
			if got != want {
				t.Fatalf("rack r%03d references %s, want %s", i, got, want)
			}
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'host' AND keyname LIKE 'new-%'"), 500; got != want {
			t.Errorf("renamed hosts: %d, want %d", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions WHERE classname = 'host' AND action = 'rename' AND author = ?", "task:"+h), 500; got != want {
			t.Errorf("rename revisions: %d, want %d", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(DISTINCT keyname) FROM revisions WHERE classname = 'rack' AND action = 'update' AND author = ?", "task:"+h), 250; got != want {
			t.Errorf("racks with an update revision by the task: %d, want %d", got, want)
		}
	})
	t.Run("without p_keyname_rename every rename fails and nothing changes", func(t *testing.T) {
		db := newDB(t)
		renameFixture(t, db)
		r := newRunner(t, db, tasks.Options{})
		before := dumpData(t, db)
		auth, err := db.UserAuth(ctx, "bob")
		if err != nil {
			t.Fatal(err)
		}
		h := submit(t, r, tasks.Params{Pipeline: "renamer", Schemas: []string{"host"}, Auth: auth, OwnerType: "api", OwnerID: "bob"})
		res := mustSucceed(t, runOne(t, r, h))
		if got, want := counts(res), counts(&tasks.Result{Scanned: 1000, Unchanged: 500, Errors: 500}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
		if got, want := res.ErrorMessages[0], "host h0000: permission denied: renaming needs p_keyname_rename"; got != want {
			t.Errorf("first message %q, want %q", got, want)
		}
		after := dumpData(t, db)
		for _, table := range dataTables {
			if after[table] != before[table] {
				t.Errorf("table %s changed", table)
			}
		}
	})
}

func TestBulkDeleteDisabled(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	var hosts, racks, sites []row
	for i := 0; i < 2000; i++ {
		hosts = append(hosts, row{Keyname: fmt.Sprintf("h%04d", i), Enabled: i%3 != 0, Data: map[string]any{"note": "n"}})
	}
	for i := 0; i < 300; i++ {
		racks = append(racks, row{Keyname: fmt.Sprintf("r%03d", i), Enabled: i%2 == 0, Data: map[string]any{}})
		sites = append(sites, row{Keyname: fmt.Sprintf("s%03d", i), Enabled: i%2 == 0, Data: map[string]any{"city": "c"}})
	}
	insertRows(t, db, "host", hosts)
	insertRows(t, db, "rack", racks)
	insertRows(t, db, "site", sites)
	r := newRunner(t, db, tasks.Options{})
	sitesBefore := instanceRows(t, db, "site")
	hostsBefore := instanceRows(t, db, "host")
	wantDeleted := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname IN ('host', 'rack') AND is_enabled = 0")

	res := mustSucceed(t, runPipeline(t, r, "bulk_delete_disabled", false, "host", "rack"))

	t.Run("counts the disabled instances as deleted", func(t *testing.T) {
		if got, want := counts(res), counts(&tasks.Result{Scanned: 2300, Deleted: int64(wantDeleted), Unchanged: int64(2300 - wantDeleted)}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("deletes exactly the disabled instances of the schemas run on", func(t *testing.T) {
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname IN ('host', 'rack') AND is_enabled = 0"), 0; got != want {
			t.Errorf("disabled hosts and racks left: %d", got)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'rack'"), 150; got != want {
			t.Errorf("racks left: %d, want %d", got, want)
		}
		hostsAfter := instanceRows(t, db, "host")
		for key, old := range hostsBefore {
			now, kept := hostsAfter[key]
			if old.Enabled == 1 && now != old {
				t.Fatalf("enabled host %s changed:\nbefore %+v\n after %+v", key, old, now)
			}
			if old.Enabled == 0 && kept {
				t.Fatalf("disabled host %s kept", key)
			}
		}
	})
	t.Run("other schemas are untouched", func(t *testing.T) {
		after := instanceRows(t, db, "site")
		if got, want := len(after), len(sitesBefore); got != want {
			t.Fatalf("sites: %d, want %d", got, want)
		}
		for key, old := range sitesBefore {
			if after[key] != old {
				t.Fatalf("site %s changed", key)
			}
		}
	})
}

func TestPipelineRenameSelfReference(t *testing.T) {
	t.Parallel()
	const n = 200
	db := newDB(t)
	mustLoad(t, db, `
- classname: _schema
  keyname: node
  kind: {dataformat: string}
  note: {dataformat: string}
  parent: {dataformat: schema, dataformat_ext: node}
`)
	var nodes []row
	for i := 0; i < n; i++ {
		data := map[string]any{"kind": "ren", "note": "n"}
		if i%2 == 1 {
			data = map[string]any{"kind": "keep", "note": "n", "parent": fmt.Sprintf("n%03d", i-1)}
		}
		nodes = append(nodes, row{Keyname: fmt.Sprintf("n%03d", i), Enabled: true, Data: data})
	}
	insertRows(t, db, "node", nodes)
	addPipeline(t, db, "renamer", `
- set_condition: [ren, field_match, kind, '^ren$']
- field_prefix: [ren, keyname, 'new-']
- field_append: ['', note, X]
`, "")
	r := newRunner(t, db, tasks.Options{})
	want := counts(&tasks.Result{Scanned: n, Updated: n})
	dry := mustSucceed(t, runPipeline(t, r, "renamer", true, "node"))
	res := mustSucceed(t, runPipeline(t, r, "renamer", false, "node"))

	t.Run("an instance whose reference was just renamed in the same batch is updated", func(t *testing.T) {
		if got := counts(res); got != want {
			t.Fatalf("counts:\n got %s\nwant %s\nerrors %v", got, want, res.ErrorMessages)
		}
		if got := counts(dry); got != want {
			t.Fatalf("dry run counts:\n got %s\nwant %s\nerrors %v", got, want, dry.ErrorMessages)
		}
	})
	t.Run("references point to the new keynames and each node got its marker", func(t *testing.T) {
		for i := 1; i < n; i += 2 {
			in := testkit.Instance(t, db, "node", fmt.Sprintf("n%03d", i))
			if got, want := fmt.Sprintf("%v %v", in.Data["parent"], in.Data["note"]), fmt.Sprintf("new-n%03d nX", i-1); got != want {
				t.Fatalf("n%03d parent and note %q, want %q", i, got, want)
			}
		}
		if got, want := markedCount(t, db, "node"), n; got != want {
			t.Fatalf("nodes marked %d, want %d", got, want)
		}
	})
}

func TestPipelineOverUsers(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustLoad(t, db, `
- classname: _user
  keyname: alice
  email: alice@example.com
  password: alice-password
- classname: _user
  keyname: bob
  is_enabled: false
  email: bob@example.com
  password: bob-password
`)
	r := newRunner(t, db, tasks.Options{})
	hash := func(login string) string {
		return testkit.QueryString(t, db, "SELECT data ->> 'password' FROM instances WHERE classname = '_user' AND keyname = ?", login)
	}
	aliceHash := hash("alice")
	if !model.IsSecretHash(aliceHash) {
		t.Fatalf("alice's stored password %q is not a hash", aliceHash)
	}

	t.Run("rules never see or change password hashes", func(t *testing.T) {
		addPipeline(t, db, "leak", `
- field_copy: ['', password, email]
- field_set: ['', firstname, x]
`, "")
		res := mustSucceed(t, runPipeline(t, r, "leak", false, "_user"))
		if got, want := counts(res), counts(&tasks.Result{Scanned: 3, Updated: 3}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s\nerrors %v", got, want, res.ErrorMessages)
		}
		for _, c := range res.Changes {
			if _, ok := c.Fields["password"]; ok {
				t.Fatalf("change of %s lists the password", c.Keyname)
			}
		}
		// The rule saw no password: copying the missing field gave '' (no email).
		if got, want := testkit.QueryString(t, db, "SELECT string_agg(keyname || '=' || coalesce(data ->> 'email', '-'), ',' ORDER BY keyname) FROM instances WHERE classname = '_user'"), "admin=-,alice=-,bob=-"; got != want {
			t.Fatalf("emails %s, want %s", got, want)
		}
		if got := queryInt(t, db, "SELECT count(*) FROM revisions WHERE classname = '_user' AND (before LIKE '%argon2%' OR after LIKE '%argon2%')"); got != 0 {
			t.Fatalf("%d revisions show a password hash", got)
		}
		if got, want := hash("alice"), aliceHash; got != want {
			t.Fatalf("alice's password hash changed")
		}
	})
	t.Run("bulk_delete_disabled deletes disabled users but never the admin account", func(t *testing.T) {
		if got, want := queryInt(t, db, "SELECT is_enabled FROM instances WHERE classname = '_user' AND keyname = 'admin'"), 0; got != want {
			t.Fatalf("admin is_enabled %d, want %d (locked)", got, want)
		}
		res := mustSucceed(t, runPipeline(t, r, "bulk_delete_disabled", false, "_user"))
		if got, want := counts(res), counts(&tasks.Result{Scanned: 3, Deleted: 1, Unchanged: 1, Errors: 1}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s\nerrors %v", got, want, res.ErrorMessages)
		}
		if got, want := strings.Join(res.ErrorMessages, "; "), "_user admin: the admin account cannot be deleted"; got != want {
			t.Fatalf("errors %q, want %q", got, want)
		}
		if got, want := testkit.QueryString(t, db, "SELECT string_agg(keyname, ',' ORDER BY keyname) FROM instances WHERE classname = '_user'"), "admin,alice"; got != want {
			t.Fatalf("users left %s, want %s", got, want)
		}
	})
	t.Run("a rename of the admin account is refused", func(t *testing.T) {
		addPipeline(t, db, "rename_all", "- field_append: ['', keyname, _old]\n", "")
		res := mustSucceed(t, runPipeline(t, r, "rename_all", false, "_user"))
		if got, want := counts(res), counts(&tasks.Result{Scanned: 2, Updated: 1, Errors: 1}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s\nerrors %v", got, want, res.ErrorMessages)
		}
		if got, want := strings.Join(res.ErrorMessages, "; "), "_user admin: the admin account cannot be renamed"; got != want {
			t.Fatalf("errors %q, want %q", got, want)
		}
		if got, want := testkit.QueryString(t, db, "SELECT string_agg(keyname, ',' ORDER BY keyname) FROM instances WHERE classname = '_user'"), "admin,alice_old"; got != want {
			t.Fatalf("users %s, want %s", got, want)
		}
	})
}

func TestPipelineEntryPermissions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	mustLoad(t, db, `
- classname: _schema
  keyname: vault
  p_delete: p_vault_delete
  note: {dataformat: string}
- classname: _permission
  keyname: p_vault_delete
- classname: _user
  keyname: reader
- classname: _user
  keyname: editor
- classname: _user
  keyname: keeper
- classname: _role
  keyname: role_reader
  permissions: [p_pipeline_run, p_data_read]
  users: [reader]
- classname: _role
  keyname: role_editor
  permissions: [p_pipeline_run, p_data_read, p_data_update, p_data_delete]
  users: [editor]
- classname: _role
  keyname: role_keeper
  permissions: [p_pipeline_run, p_data_read, p_data_update, p_vault_delete]
  users: [keeper]
`)
	var vaults []row
	for i := 0; i < 300; i++ {
		vaults = append(vaults, row{Keyname: fmt.Sprintf("v%03d", i), Enabled: i%3 != 0, Data: map[string]any{"note": "n"}})
	}
	insertRows(t, db, "vault", vaults)
	addPipeline(t, db, "touch", `
- set_condition: [off, is_false, is_enabled]
- field_set: [off, _action, enable]
- field_set: ['!off', note, touched]
`, "")
	auth := func(login string) *model.Auth {
		a, err := db.UserAuth(ctx, login)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	r := newRunner(t, db, tasks.Options{})
	run := func(t *testing.T, login, pipeline string, dryrun bool) *tasks.Result {
		t.Helper()
		h := submit(t, r, tasks.Params{Pipeline: pipeline, Schemas: []string{"vault"}, DryRun: dryrun, Auth: auth(login)})
		return mustSucceed(t, runOne(t, r, h))
	}

	t.Run("a dry run by a reader reports the writes it may not make", func(t *testing.T) {
		before := dumpData(t, db)
		res := run(t, "reader", "touch", true)
		if got, want := counts(res), counts(&tasks.Result{Scanned: 300, Errors: 300}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
		if got, want := res.ErrorMessages[0]+" | "+res.ErrorMessages[1], "vault v000: permission denied: update of vault needs p_data_update | vault v001: permission denied: update of vault needs p_data_update"; got != want {
			t.Fatalf("messages %q, want %q", got, want)
		}
		if after := dumpData(t, db); after["instances"] != before["instances"] || after["revisions"] != before["revisions"] {
			t.Fatalf("a dry run changed data")
		}
	})
	t.Run("the global delete permission does not cover a schema with its own p_delete", func(t *testing.T) {
		res := run(t, "editor", "bulk_delete_disabled", false)
		if got, want := counts(res), counts(&tasks.Result{Scanned: 300, Unchanged: 200, Errors: 100}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
		if got, want := res.ErrorMessages[0], "vault v000: permission denied: delete of vault needs p_vault_delete"; got != want {
			t.Fatalf("first message %q, want %q", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'vault'"), 300; got != want {
			t.Fatalf("vaults %d, want %d", got, want)
		}
	})
	t.Run("the schema's own p_delete allows the deletes", func(t *testing.T) {
		res := run(t, "keeper", "bulk_delete_disabled", false)
		if got, want := counts(res), counts(&tasks.Result{Scanned: 300, Unchanged: 200, Deleted: 100}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s\nerrors %v", got, want, res.ErrorMessages)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'vault'"), 200; got != want {
			t.Fatalf("vaults %d, want %d", got, want)
		}
	})
}

// TestPipelineSeesSchemaChangesBetweenBatches: a batch works with the schema as it is
// when the batch starts. A field added while the run is between batches is set by the
// later batches; before it exists, the rule's value is not a field and is dropped.
func TestPipelineSeesSchemaChangesBetweenBatches(t *testing.T) {
	t.Parallel()
	const n, batch = 6, 2
	db := newDB(t)
	insertRows(t, db, "host", markerRows(n))
	addPipeline(t, db, "extra", "- field_set: ['', extra, x]\n", "")
	r := newRunner(t, db, tasks.Options{BatchSize: batch, AfterBatch: func(_ string, b int) error {
		if b == 1 {
			// The test schemas again, host with one field more.
			tags := "  tags: {dataformat: string, cardinal_max: 0}\n"
			mustLoad(t, db, strings.Replace(testSchemas, tags, tags+"  extra: {dataformat: string}\n", 1))
		}
		return nil
	}})
	res := mustSucceed(t, runPipeline(t, r, "extra", false, "host"))
	if got, want := counts(res), fmt.Sprintf("scanned=%d updated=%d deleted=0 disabled=0 enabled=0 unchanged=%d discarded=0 errors=0",
		n, n-batch, batch); got != want {
		t.Fatalf("counts %s, want %s", got, want)
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'host' AND data ->> 'extra' = 'x'"), n-batch; got != want {
		t.Fatalf("hosts with extra = x: %d, want %d", got, want)
	}
}
