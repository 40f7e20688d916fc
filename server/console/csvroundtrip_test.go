package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"dataservice/store"
)

// TestCSVExportReimports: a list's CSV export uses the delimiter the import tool and
// /api/rawfile/ default to (CSV_DELIMITER), so the exported file loads back with the
// defaults and changes nothing; that holds when the setting changes too.
func TestCSVExportReimports(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	e.load(`
- {classname: _role, keyname: writers, permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_data_delete, p_data_export, p_data_import, p_api_rawfile], _action: update}
- {classname: rack, keyname: r3, displayname: "Row 3; the one by the door, \"cold\"", site: paris, units: 1, mgmt: 10.0.0.3, tags: [a;b, "c d"]}
- {classname: rack, keyname: r4, is_enabled: false}
`)
	b := e.browser()
	b.signIn("writer", "writer-pass-1")
	rawfile := func(body string) store.LoadResult {
		t.Helper()
		req, _ := http.NewRequest("POST", e.srv.URL+"/api/rawfile/?schema=rack", strings.NewReader(body))
		req.SetBasicAuth("writer", "writer-pass-1")
		req.Header.Set("Content-Type", "text/csv")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var res store.LoadResult
		if resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil {
			t.Fatalf("rawfile: %d %s", resp.StatusCode, raw)
		}
		return res
	}
	for _, delim := range []string{";", "\t"} {
		if delim != ";" {
			if err := e.db.SetConfig(context.Background(), map[string]string{store.ConfigCSVDelimiter: delim}); err != nil {
				t.Fatal(err)
			}
		}
		p := b.get("/data/private/rack/?export=csv")
		want(t, p, 200)
		header := strings.SplitN(p.body, "\n", 2)[0]
		if wantHeader := strings.Join([]string{"keyname", "displayname", "site", "units", "mgmt", "tags", "is_enabled"}, delim); header != wantHeader {
			t.Fatalf("delimiter %q: the export's header %q, want %q", delim, header, wantHeader)
		}
		if res := rawfile(p.body); res.Unchanged != 4 || res.Errors != 0 || res.Created+res.Updated+res.Deleted+res.Disabled+res.Enabled != 0 {
			t.Fatalf("delimiter %q: the export loaded back through /api/rawfile/ changed something: %+v\n%s", delim, res, p.body)
		}
		imp := b.post("/data/private/import/", url.Values{"csrf": {b.csrf()}, "format": {"csv"}, "schema": {"rack"},
			"keyfield": {"keyname"}, "delimiter": {""}, "encoding": {"utf-8"}, "text": {p.body}, "do": {"import"}})
		want(t, imp, 200, `data-count="unchanged">4<`, `data-count="errors">0<`, `data-count="updated">0<`)
	}
}
