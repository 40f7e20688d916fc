package store

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// scriptRecorder records what archiveScript passes on.
type scriptRecorder struct {
	got []string
}

func (r *scriptRecorder) copyRows(table string, cols []string, data io.Reader) error {
	b, err := io.ReadAll(data)
	if err != nil {
		return err
	}
	r.got = append(r.got, table+"("+strings.Join(cols, ",")+"): "+string(b))
	return nil
}

func (r *scriptRecorder) setSequence(seq string, value int64, called bool) error {
	r.got = append(r.got, seq+" set")
	return nil
}

// TestArchiveScriptStrict: the script of an archive's data passes on table rows and
// sequence values in pg_dump's exact forms, skips its header lines, and refuses any
// other line, naming its number; nothing of the text is a statement to run.
func TestArchiveScriptStrict(t *testing.T) {
	const header = "--\n-- PostgreSQL database dump\n--\n\n\\restrict abcDEF123\n" +
		"SET statement_timeout = 0;\nSET client_encoding = 'UTF8';\n" +
		"SELECT pg_catalog.set_config('search_path', '', false);\n\n"
	good := header + "COPY public.registry (key, \"value\") FROM stdin;\nDB_VERSION\t1.0.0\nx\ta\\\\.b\n\\.\n\n" +
		"SELECT pg_catalog.setval('public.schemas_id_seq', 11, true);\n\\unrestrict abcDEF123\n"
	r := &scriptRecorder{}
	if err := archiveScript(strings.NewReader(good), r); err != nil {
		t.Fatalf("a script as pg_dump writes it: %v", err)
	}
	if want := "registry(key,value): DB_VERSION\t1.0.0\nx\ta\\\\.b\n|schemas_id_seq set"; strings.Join(r.got, "|") != want {
		t.Fatalf("passed on %q, want %q", strings.Join(r.got, "|"), want)
	}
	for _, c := range []struct{ name, line, want string }{
		{"a COPY from a program", "COPY public.registry (key) FROM PROGRAM 'id';", "line 10"},
		{"a COPY to a program", "COPY public.registry (key) TO PROGRAM 'id';", "not a table's rows"},
		{"a statement after a setting", "SET work_mem = 1; DROP TABLE registry;", "neither a table's rows"},
		{"a search path of another schema's functions", "SELECT pg_catalog.set_config('search_path', 'x', false); SELECT 1;", "line 10"},
		{"a function", "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';", "neither a table's rows"},
		{"a setval calling a function", "SELECT pg_catalog.setval('public.s', f(), true);", "line 10"},
		{"a large object", "SELECT pg_catalog.lo_open('16400', 131072);", "line 10"},
		{"a psql meta-command", "\\! id", "line 10"},
		{"rows without their end", "COPY public.registry (key) FROM stdin;\nx", "ends inside the rows of registry"},
	} {
		err := archiveScript(strings.NewReader(header+c.line+"\n"), &scriptRecorder{})
		if !errors.Is(err, ErrArchiveRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it refused (%s)", c.name, err, c.want)
		}
	}
}
