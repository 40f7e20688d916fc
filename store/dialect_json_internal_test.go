package store

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"testing"
)

// passConn is a connection of this test pass's engine that needs no layout: a fresh
// SQLite file, or on the PostgreSQL pass (DATASERVICE_TEST_DB=postgres) the test
// cluster's maintenance database (the JSON fragments read no table).
func passConn(t *testing.T) conn {
	t.Helper()
	if os.Getenv("DATASERVICE_TEST_DB") != "postgres" {
		return openDialectDB(t).reader()
	}
	addr := os.Getenv("DATASERVICE_TEST_PG")
	if addr == "" {
		t.Fatal("DATASERVICE_TEST_DB=postgres needs DATASERVICE_TEST_PG, the test cluster's URL")
	}
	pool, err := sql.Open(postgresDialect.driver, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return conn{pool, postgresDialect}
}

// The JSON fragments give the same answers on every engine, with their paths and
// values given as literals or as `?` parameters: a fragment that named a `?` argument
// twice would take two parameters and fail or read the wrong one.
func TestDialectJSONFragments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := passConn(t)
	d := c.dia
	const doc = `{"a":"x","b":"it's \"q\"","e":"","l":["x","y"],"m":[1,"2"],"n":3,"o":{"k":[1,2]},"r":2.5,"t":true,"z":null}`
	null := sql.NullString{}
	str := func(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
	for _, q := range []struct {
		name string
		expr string
		args []any
		want sql.NullString
	}{
		{"value of a text", d.jsonValue("data", "?"), []any{"$.a"}, str("x")},
		{"value of a quoted name", d.jsonValue("data", "?"), []any{`$."b"`}, str(`it's "q"`)},
		{"value of an empty text", d.jsonValue("data", "'$.e'"), nil, str("")},
		{"value of a number", d.jsonValue("data", "?"), []any{"$.n"}, str("3")},
		{"value of null", d.jsonValue("data", "?"), []any{"$.z"}, null},
		{"value of a missing member", d.jsonValue("data", "?"), []any{"$.none"}, null},
		{"text of a text", d.jsonText("data", "?"), []any{"$.a"}, str("x")},
		{"text of a list", d.jsonText("data", "?"), []any{"$.l"}, str(`["x","y"]`)},
		{"text of a quoted name", d.jsonText("data", "?"), []any{`$."o"`}, str(`{"k":[1,2]}`)},
		{"text of null", d.jsonText("data", "?"), []any{"$.z"}, null},
		{"text of a missing member", d.jsonText("data", "?"), []any{"$.none"}, null},
		{"type of a text", d.jsonType("data", "?"), []any{"$.a"}, str("text")},
		{"type of a list", d.jsonType("data", "?"), []any{"$.l"}, str("array")},
		{"type of an object", d.jsonType("data", "?"), []any{"$.o"}, str("object")},
		{"type of an integer", d.jsonType("data", "?"), []any{"$.n"}, str("integer")},
		{"type of a real", d.jsonType("data", "?"), []any{"$.r"}, str("real")},
		{"type of true", d.jsonType("data", "?"), []any{"$.t"}, str("true")},
		{"type of null", d.jsonType("data", "?"), []any{"$.z"}, str("null")},
		{"type of a missing member", d.jsonType("data", "?"), []any{"$.none"}, null},
		{"holds its text", d.jsonHolds("data", "?", "?"), []any{"$.a", "x"}, str("1")},
		{"holds not another text", d.jsonHolds("data", "?", "?"), []any{"$.a", "X"}, str("0")},
		{"holds an empty text", d.jsonHolds("data", "?", "?"), []any{"$.e", ""}, str("1")},
		{"holds a list item", d.jsonHolds("data", "?", "?"), []any{"$.l", "y"}, str("1")},
		{"holds not a missing item", d.jsonHolds("data", "?", "?"), []any{"$.l", "z"}, str("0")},
		{"holds a text item among numbers", d.jsonHolds("data", "?", "?"), []any{"$.m", "2"}, str("1")},
		{"holds not a number as text", d.jsonHolds("data", "?", "?"), []any{"$.m", "1"}, str("0")},
		{"holds not a number member as text", d.jsonHolds("data", "?", "?"), []any{"$.n", "3"}, str("0")},
		{"holds nothing of a missing member", d.jsonHolds("data", "?", "?"), []any{"$.none", "x"}, str("0")},
		{"holds with a composed path", d.jsonHolds("data", "'$.' || ?", "?"), []any{"l", "x"}, str("1")},
		{"holds a quote", d.jsonHolds("data", "?", "?"), []any{"$.b", `it's "q"`}, str("1")},
		{"set a member", d.jsonSet("data", "?", "?"), []any{"$.a", "w"},
			str(`{"a":"w","b":"it's \"q\"","e":"","l":["x","y"],"m":[1,"2"],"n":3,"o":{"k":[1,2]},"r":2.5,"t":true,"z":null}`)},
		{"set a quoted member", d.jsonSet("data", "?", "?"), []any{`$."n"`, `say "hi"`},
			str(`{"a":"x","b":"it's \"q\"","e":"","l":["x","y"],"m":[1,"2"],"n":"say \"hi\"","o":{"k":[1,2]},"r":2.5,"t":true,"z":null}`)},
		{"remove a member", d.jsonRemove("data", "?"), []any{"$.l"},
			str(`{"a":"x","b":"it's \"q\"","e":"","m":[1,"2"],"n":3,"o":{"k":[1,2]},"r":2.5,"t":true,"z":null}`)},
		{"remove a quoted member", d.jsonRemove("data", "?"), []any{`$."o"`},
			str(`{"a":"x","b":"it's \"q\"","e":"","l":["x","y"],"m":[1,"2"],"n":3,"r":2.5,"t":true,"z":null}`)},
		{"remove a missing member", d.jsonRemove("data", "'$.none'"), nil, str(doc)},
		{"remove the last member", d.jsonRemove(`'{"a":1}'`, "?"), []any{"$.a"}, str("{}")},
	} {
		t.Run(q.name, func(t *testing.T) {
			expr := q.expr
			if strings.HasPrefix(q.name, "holds") {
				expr = "CASE WHEN " + expr + " THEN '1' ELSE '0' END"
			}
			// The fragment's parameters come first, then a marker that shows they were
			// all taken (a fragment naming a `?` twice takes one more), then the
			// document, numbered.
			stmt := "SELECT " + expr + ", ? FROM (SELECT CAST(?" + strconv.Itoa(len(q.args)+2) + " AS text) AS data) doc"
			args := append(append([]any{}, q.args...), "after", doc)
			var got sql.NullString
			var after string
			if err := c.queryRowContext(ctx, stmt, args...).Scan(&got, &after); err != nil {
				t.Fatalf("%s %v: %v", stmt, q.args, err)
			}
			if got != q.want || after != "after" {
				t.Errorf("%s %v = %v, %q; want %v, \"after\"", stmt, q.args, got, after, q.want)
			}
		})
	}
}
