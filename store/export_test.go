package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

const exportDoc = `
- classname: _enumerate
  keyname: env
  content: |
    - {value: prod}
    - {value: dev}
- classname: _schema
  keyname: site
  displayname: Sites
  _options: {description: Where things are, icon: fa-building}
  city: {dataformat: string}
  description: {dataformat: string, displayname: Notes}
- classname: _schema
  keyname: host
  displayname: Hosts
  p_read: p_host_read
  hostname: {dataformat: string, cardinal_min: 1}
  port: {dataformat: int, dataformat_ext: gte_1 lte_65535, default: 22}
  weight: {dataformat: float}
  active: {dataformat: boolean}
  born: {dataformat: date}
  seen: {dataformat: datetime}
  ip: {dataformat: ipv4}
  nets: {dataformat: ipv4, dataformat_ext: subnet, cardinal_max: 0}
  tags: {dataformat: string, cardinal_max: 3}
  site: {dataformat: schema, dataformat_ext: site}
  peer: {dataformat: schema, dataformat_ext: host}
  env: {dataformat: enumerate, dataformat_ext: env}
  city: {dataformat: external, dataformat_ext: site city}
  conf: {dataformat: text, dataformat_ext: yaml}
  token: {dataformat: secret}
- {classname: site, keyname: par, displayname: Paris, city: Paris, description: "HQ: main"}
- {classname: site, keyname: "lyon/2", city: Lyon, is_enabled: false}
- classname: host
  keyname: web1
  displayname: "Web #1"
  hostname: web1.example.org
  port: 443
  weight: 2.5
  active: yes
  born: 2020-02-29
  seen: 2026-01-02 03:04:05
  ip: 10.0.0.1
  nets: 10.0.0.0/8, 192.168.0.0/16
  tags: [a, "b, c"]
  site: par
  peer: db1
  env: prod
  conf: |
    key: value
    list: [1, 2]
  token: s3cr3t
- {classname: host, keyname: db1, hostname: db1, site: "lyon/2", active: false, weight: 3}
- {classname: ipam_ip, displayname: 10.0.0.1, hostname: web1}
`

// instancesText renders every instance of cls, without secret fields.
func instancesText(tb testing.TB, db *store.DB, cls string) string {
	tb.Helper()
	ctx := context.Background()
	s := schema(tb, db, cls)
	list, err := db.Instances(ctx, cls, 0, 1000)
	if err != nil {
		tb.Fatal(err)
	}
	var lines []string
	for _, in := range list {
		data := map[string]any{}
		for k, v := range in.Data {
			if f := s.Field(k); f != nil && f.Dataformat != "secret" {
				data[k] = v
			}
		}
		b, _ := json.Marshal(data)
		lines = append(lines, fmt.Sprintf("%s|%s|%v|%s", in.Keyname, in.Displayname, in.IsEnabled, b))
	}
	return strings.Join(lines, "\n")
}

func schemaText(tb testing.TB, db *store.DB, cls string) string {
	tb.Helper()
	b, err := json.Marshal(schema(tb, db, cls).Doc())
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestExportRoundTrip(t *testing.T) {
	t.Parallel()
	src := newTestDB(t)
	mustLoad(t, src, exportDoc, store.LoadOptions{})
	names := []string{"_enumerate", "site", "host", "ipam_ip"}
	for _, format := range []string{"yaml", "json"} {
		t.Run(format+" export loads back into an empty database", func(t *testing.T) {
			var buf bytes.Buffer
			if err := src.Export(context.Background(), &buf, names, format); err != nil {
				t.Fatalf("export: %v", err)
			}
			out := buf.String()
			if format == "json" && !json.Valid(buf.Bytes()) {
				t.Fatalf("json export is not valid JSON:\n%s", out)
			}
			for _, secret := range []string{"s3cr3t", "argon2", "token: $", `"token": "`} {
				if strings.Contains(out, secret) {
					t.Fatalf("export holds %q:\n%s", secret, out)
				}
			}
			dst := newTestDB(t)
			res := mustLoad(t, dst, out, store.LoadOptions{})
			// Built-in schemas are not exported: _enumerate:env, 2 schemas, 2 sites,
			// 2 hosts, 1 address. The address may be created by IP collection when
			// web1 loads, and then be updated by its own entry.
			if got, want := res.Created+res.Updated, 8; got != want {
				t.Fatalf("created+updated: got %d, want %d (%s)", got, want, counts(res))
			}
			for _, cls := range []string{"site", "host"} {
				if got, want := schemaText(t, dst, cls), schemaText(t, src, cls); got != want {
					t.Fatalf("schema %s:\ngot  %s\nwant %s", cls, got, want)
				}
			}
			for _, cls := range names {
				if got, want := instancesText(t, dst, cls), instancesText(t, src, cls); got != want {
					t.Fatalf("instances of %s:\ngot\n%s\nwant\n%s", cls, got, want)
				}
			}
			if v, ok := instance(t, dst, "host", "web1").Data["token"]; ok {
				t.Fatalf("secret crossed the export: %v", v)
			}
			res = mustLoad(t, dst, out, store.LoadOptions{})
			if got, want := counts(res), "created=0 updated=0 unchanged=8 deleted=0 enabled=0 disabled=0 skipped=0 errors=0"; got != want {
				t.Fatalf("second load of the export: got %s, want %s", got, want)
			}
		})
	}
	t.Run("export writes computed external values", func(t *testing.T) {
		var buf bytes.Buffer
		if err := src.Export(context.Background(), &buf, []string{"host"}, "json"); err != nil {
			t.Fatal(err)
		}
		var docs []map[string]any
		if err := json.Unmarshal(buf.Bytes(), &docs); err != nil {
			t.Fatal(err)
		}
		// The schema, then the instances in id order: web1 was created by the
		// second pass, after db1.
		var keys []string
		for _, d := range docs {
			keys = append(keys, fmt.Sprint(d["classname"], ":", d["keyname"]))
		}
		if got, want := strings.Join(keys, ","), "_schema:host,host:db1,host:web1"; got != want {
			t.Fatalf("docs: got %s, want %s", got, want)
		}
		if got, want := docs[2]["city"], any("Paris"); got != want {
			t.Fatalf("web1 city: got %v, want %v", got, want)
		}
		if got, want := docs[1]["city"], any("Lyon"); got != want {
			t.Fatalf("db1 city: got %v, want %v", got, want)
		}
	})
}

func TestExportErrors(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	var buf bytes.Buffer
	if err := db.Export(ctx, &buf, []string{"_user"}, "xml"); store.ErrorCode(err) != model.EInvalid {
		t.Fatalf("unknown format: got %v, want an invalid error", err)
	}
	if err := db.Export(ctx, &buf, []string{"nosuch"}, "yaml"); store.ErrorCode(err) != model.ENotFound {
		t.Fatalf("unknown schema: got %v, want a not-found error", err)
	}
	for _, format := range []string{"yaml", "json"} {
		t.Run("empty "+format+" export is an empty list", func(t *testing.T) {
			mustLoad(t, db, `{classname: _schema, keyname: empty}`, store.LoadOptions{})
			buf.Reset()
			if err := db.Export(ctx, &buf, []string{"_pipeline"}, format); err != nil {
				t.Fatal(err)
			}
			entries, err := codec.ParseDocument("export", buf.Bytes())
			if err != nil {
				t.Fatalf("parse export %q: %v", buf.String(), err)
			}
			if got, want := len(entries), 1; got != want {
				t.Fatalf("entries of _pipeline export: got %d, want %d", got, want)
			}
			buf.Reset()
			if err := db.Export(ctx, &buf, nil, format); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.TrimSpace(buf.String()), "[]"; got != want {
				t.Fatalf("export of nothing: got %q, want %q", got, want)
			}
		})
	}
}

// TestExportRulesAndSchedulesLoadBack: an export of every class, loaded into an empty
// database, brings back an event rule and a schedule naming a pipeline: their
// instances come after every other class's, so the pipeline exists when they load.
func TestExportRulesAndSchedulesLoadBack(t *testing.T) {
	t.Parallel()
	src := newTestDB(t)
	mustLoad(t, src, `
- {classname: _schema, keyname: host, note: {dataformat: string}}
- {classname: host, keyname: a, note: x}
- {classname: _pipeline, keyname: mark, content: "- field_set: ['', note, marked]\n"}
- {classname: _eventrule, keyname: onhost, schemas: [host], actions: [update], pipeline: mark}
- {classname: _schedule, keyname: nightly, pipeline: mark, schemas: [host], cron: "0 3 * * *"}
`, store.LoadOptions{})
	ctx := context.Background()
	names, err := src.SchemaNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.Export(ctx, &buf, names, "yaml"); err != nil {
		t.Fatalf("export: %v", err)
	}
	dst := newTestDB(t)
	mustLoad(t, dst, buf.String(), store.LoadOptions{})
	for _, cls := range []string{"_pipeline", "_eventrule", "_schedule", "host"} {
		if got, want := instancesText(t, dst, cls), instancesText(t, src, cls); got != want {
			t.Fatalf("instances of %s:\ngot\n%s\nwant\n%s", cls, got, want)
		}
	}
}
