package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// postgresDialect is PostgreSQL's SQL, through pgx's database/sql adapter. Several
// processes (nodes) share one database; a write transaction takes one
// transaction-scoped advisory lock first (lockWriter), so writes are serialized
// across every node exactly as SQLite serializes them in one file, and Apply's
// bookkeeping (the id high-water mark, counts) needs no further locking.
var postgresDialect = &dialect{
	name:        "postgres",
	driver:      "pgx",
	dsn:         postgresDSN,
	readOnlyDSN: func(url string) string { return postgresDSN(url, true) },
	openPool:    openPostgresPool,
	// PostgreSQL queues the waiters of a lock in arrival order: no turnstile.
	turnstile:  false,
	lockWriter: "SELECT pg_advisory_xact_lock(" + writerLockKey + ")",
	// Each statement of a write transaction sees what committed before it began, so
	// the statements after the writer lock see every earlier writer's commit.
	writeTx:  &sql.TxOptions{Isolation: sql.LevelReadCommitted},
	snapshot: &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	rebind:   postgresRebind,

	isUnique:   func(err error) bool { return pgCode(err) == "23505" },
	isBusy:     func(err error) bool { return pgCode(err) == "55P03" },
	isDiskFull: func(err error) bool { return pgCode(err) == "53100" },
	// 22021: a character not in the database's repertoire (NUL, in text); 22P05:
	// one the encoding cannot translate.
	isBadText: func(err error) bool { c := pgCode(err); return c == "22021" || c == "22P05" },

	insertID: postgresInsertID,
	// A keyname another instance of the class holds: the UPDATE matches no row.
	convertKeyname: `UPDATE instances SET keyname = ?1, displayname = ?2, updated_at = ?3 WHERE id = ?4
		AND NOT EXISTS (SELECT 1 FROM instances o WHERE o.classname = instances.classname AND o.keyname = ?1 AND o.id <> ?4)`,

	jsonValue:  postgresJSONValue,
	jsonText:   postgresJSONText,
	jsonType:   postgresJSONType,
	jsonHolds:  postgresJSONHolds,
	jsonSet:    postgresJSONSet,
	jsonRemove: postgresJSONRemove,
	jsonSort:   postgresJSONSort,

	contains: func(text, sub string) string { return "strpos(CAST(" + text + " AS text), " + sub + ") > 0" },
	like:     postgresLike,
	hexKeyname: func(col string) string {
		return "length(" + col + ") = 8 AND " + col + ` ~ '^[0-9a-f]{8}$'`
	},
	rowOrder: "row_order",
	// Claims take the row they pick under its row lock and pass over rows locked by
	// another node's claim in progress, whatever the writer lock does.
	skipLocked: " FOR UPDATE SKIP LOCKED",
	greatest:   func(a, b string) string { return "greatest(" + a + ", " + b + ")" },

	// The layout's triggers append to the delta tables (each update of one counter
	// row would add a version PostgreSQL walks at the next update in the same
	// transaction: quadratic in the rows a transaction writes); the commit folds
	// them, and a read adds what is not folded yet (rows written by SQL outside the
	// store).
	countInstances: `SELECT coalesce((SELECT n FROM instance_counts WHERE classname = ?1), 0)
		+ coalesce((SELECT sum(n) FROM instance_count_deltas WHERE classname = ?1), 0)`,
	countBlocks: `SELECT coalesce((SELECT sum(n) FROM ipam_blocks WHERE block >= ?1 AND block <= ?2), 0)
		+ coalesce((SELECT sum(n) FROM ipam_block_deltas WHERE block >= ?1 AND block <= ?2), 0)`,
	beforeCommit: []string{
		`WITH d AS (DELETE FROM instance_count_deltas RETURNING classname, n)
		INSERT INTO instance_counts(classname, n) SELECT classname, sum(n) FROM d GROUP BY classname
		ON CONFLICT(classname) DO UPDATE SET n = instance_counts.n + excluded.n`,
		`WITH d AS (DELETE FROM ipam_block_deltas RETURNING block, n)
		INSERT INTO ipam_blocks(block, n) SELECT block, sum(n) FROM d GROUP BY block
		ON CONFLICT(block) DO UPDATE SET n = ipam_blocks.n + excluded.n`,
		`WITH d AS (DELETE FROM instance_id_deletes RETURNING id)
		UPDATE instance_ids SET high = greatest(high, (SELECT max(id) FROM d)) WHERE EXISTS (SELECT 1 FROM d)`,
	},
	countDeltas: map[string]string{"instance_counts": "instance_count_deltas", "ipam_blocks": "ipam_block_deltas",
		"instance_ids": "instance_id_deletes"},
	foldedRead: map[string]string{
		"instance_counts": `SELECT classname, CAST(sum(n) AS BIGINT) AS n FROM (SELECT classname, n FROM instance_counts
			UNION ALL SELECT classname, n FROM instance_count_deltas) d GROUP BY classname`,
		"ipam_blocks": `SELECT block, CAST(sum(n) AS BIGINT) AS n FROM (SELECT block, n FROM ipam_blocks
			UNION ALL SELECT block, n FROM ipam_block_deltas) d GROUP BY block`,
		"instance_ids": `SELECT id, greatest(high, coalesce((SELECT max(id) FROM instance_id_deletes), high)) AS high
			FROM instance_ids`,
	},

	// The engine maintains the trigram index in every write: nothing waits for it.
	searchFrom: "instances i",
	searchWhere: "dataservice_fold(i.keyname || ' ' || i.displayname || ' ' || CAST(i.data AS text))" +
		` LIKE ? ESCAPE '\' AND i.classname = ?`,
	searchID:    "i.id",
	searchQuery: postgresSearchQuery,

	layout:                 postgresLayout,
	insertInstance:         postgresInsertInstance,
	insertInstanceIfAbsent: postgresInsertInstance + " ON CONFLICT(classname, keyname) DO NOTHING",
	readLayoutVersion:      postgresLayoutVersion,
	setLayoutVersion: func(n int) string {
		return fmt.Sprintf("UPDATE layout_version SET version = %d", n)
	},
	layoutVersionsTable: `CREATE TABLE IF NOT EXISTS layout_versions (
	owner   TEXT PRIMARY KEY,
	version INTEGER NOT NULL
)`,
	hasLayoutVersions: "SELECT to_regclass('layout_versions') IS NOT NULL",
	reservedPrefix:    "pg_",

	backup:      postgresBackup,
	lockStartup: postgresLockStartup,
}

func init() { postgresDialect.checkFile = postgresCheckSchema }

// writerLockKey is the advisory lock every write transaction takes: any number
// unlikely to collide with another application's locks in the same database.
const writerLockKey = "7305721195838"

// isPostgresURL reports whether a database address names a PostgreSQL database.
func isPostgresURL(addr string) bool {
	return strings.HasPrefix(addr, "postgres://") || strings.HasPrefix(addr, "postgresql://")
}

// postgresDSN is the URL with the settings every connection applies: the read pool's
// transactions are read-only; the search path is the URL's search_path, or public,
// sent at connect, which overrides a search_path the database or the role sets (so
// such a setting cannot redirect the service's names to another schema's objects).
func postgresDSN(addr string, readOnly bool) string {
	u, err := url.Parse(addr)
	if err != nil {
		return addr // pgx reports the error at connect, with the address
	}
	q := u.Query()
	if q.Get("application_name") == "" {
		q.Set("application_name", "dataservice")
	}
	if q.Get("search_path") == "" && !strings.Contains(q.Get("options"), "search_path") {
		q.Set("search_path", "public")
	}
	if readOnly {
		q.Set("default_transaction_read_only", "on")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// IsFileAddr reports whether the database address addr names a file (SQLite):
// anything but a postgres:// or postgresql:// URL. Callers that check a database
// before opening it (the directory exists, the file is writable) check files only.
func IsFileAddr(addr string) bool { return !isPostgresURL(addr) }

// RedactURL is a database address for messages: a PostgreSQL URL without its
// passwords (the user's, and the password and sslpassword query parameters, each
// shown as xxxxx); a path as it is.
func RedactURL(addr string) string {
	if !isPostgresURL(addr) {
		return addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "postgres://(an address that does not parse)"
	}
	u.RawQuery = mapSecretParams(u.RawQuery, func(string, string) (string, bool) { return "xxxxx", true })
	return u.Redacted()
}

// secretParams are the query parameters of a PostgreSQL URL that hold a secret, and
// the environment variable PostgreSQL's client tools read each from.
var secretParams = map[string]string{"password": "PGPASSWORD", "sslpassword": "PGSSLPASSWORD"}

// mapSecretParams rewrites the secret parameters of the raw query q, in place and
// order: f gets each one's name and value and returns its new value, or false to
// drop it. Other parameters are kept byte for byte.
func mapSecretParams(q string, f func(name, value string) (string, bool)) string {
	if q == "" {
		return q
	}
	parts := strings.Split(q, "&")
	kept := parts[:0]
	for _, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if _, secret := secretParams[name]; err != nil || !secret {
			kept = append(kept, p)
			continue
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			value = v
		}
		if nv, ok := f(name, value); ok {
			kept = append(kept, k+"="+url.QueryEscape(nv))
		}
	}
	return strings.Join(kept, "&")
}

// urlSecrets are the secrets a PostgreSQL URL holds: the user's password and the
// values of its secret query parameters, each also as the URL escapes it.
func urlSecrets(addr string) []string {
	u, err := url.Parse(addr)
	if err != nil {
		return nil
	}
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		for _, e := range []string{url.QueryEscape(s), url.PathEscape(s)} {
			if e != s {
				out = append(out, e)
			}
		}
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
	}
	mapSecretParams(u.RawQuery, func(_, v string) (string, bool) {
		add(v)
		return v, true
	})
	return out
}

// pgCode is the SQLSTATE of a PostgreSQL error, "" for any other error.
func pgCode(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// postgresRebind turns SQLite's `?` and `?N` placeholders into `$N`, outside string
// literals, quoted identifiers and comments. A bare `?` is one more than the largest
// number before it, as in SQLite.
func postgresRebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(query) {
				if query[j] == c {
					if j+1 < len(query) && query[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(query) {
				j = len(query) - 1
			}
			b.WriteString(query[i : j+1])
			i = j
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i - 1
			}
			b.WriteString(query[i : i+j+1])
			i += j
		case c == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			k := n + 1
			if j > i+1 {
				k, _ = strconv.Atoi(query[i+1 : j])
			}
			if k > n {
				n = k
			}
			b.WriteString("$" + strconv.Itoa(k))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// postgresInsertID runs the INSERT with RETURNING id.
func postgresInsertID(ctx context.Context, c rowRunner, query string, args ...any) (int64, bool, error) {
	var id int64
	err := c.queryRowContext(ctx, query+" RETURNING id", args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return id, true, nil
}

// The JSON fragments read a document (a json column or JSON text) as jsonb and the
// path as a SQL/JSON path ($.name and $."name" mean the same as in SQLite). Each
// fragment holds each of its arguments exactly once: an argument may be a `?`, and a
// `?` written twice would be two parameters. Where a fragment needs a value twice, it
// names it once in a subquery. jsonSort alone is several ORDER BY keys, each reading
// the path: its path is a literal.
func postgresJSONAt(doc, path string) string {
	return "jsonb_path_query_first(CAST(" + doc + " AS jsonb), CAST(CAST(" + path + " AS text) AS jsonpath))"
}

// postgresJSONValue is the value as SQL: text for a JSON string, the JSON text of a
// number, boolean, list or object, NULL for null or missing (SQLite's json_extract
// returns numbers as numbers; compared with a parameter, text compares the same way
// for the values the store compares, and sorting uses postgresJSONSort).
func postgresJSONValue(doc, path string) string {
	return "(" + postgresJSONAt(doc, path) + " #>> '{}')"
}

// postgresJSONText is the value as text when it is text, its JSON text otherwise.
// A top-level member ($.name or $."name") is read from the json text itself, so a
// list or object comes back exactly as stored (jsonb would space it); a deeper path
// goes through jsonb.
func postgresJSONText(doc, path string) string {
	return "(SELECT CASE WHEN m.k IS NULL THEN jsonb_path_query_first(CAST(m.d AS jsonb), CAST(m.p AS jsonpath)) #>> '{}'" +
		" ELSE m.d ->> m.k END FROM (SELECT CAST(" + doc + " AS json), p.p, coalesce(r.r[1], r.r[2])" +
		" FROM (SELECT CAST(" + path + ` AS text)) p(p), regexp_match(p.p, '^\$\.(?:"([^"\\]*)"|([A-Za-z_][A-Za-z0-9_]*))$') r(r)) m(d, p, k))`
}

// postgresJSONSort orders by the value as SQLite orders json_extract's: a rank
// (missing or null first, then numbers and booleans, then everything else), the
// number's value, then the text by its bytes (COLLATE "C", whatever the database's
// collation). A rank is never NULL, so missing values come first ascending and last
// descending, as in SQLite, where PostgreSQL alone would put NULLs last.
func postgresJSONSort(doc, path string) []string {
	v := postgresJSONAt(doc, path)
	return []string{
		"(CASE coalesce(jsonb_typeof(" + v + "), 'null') WHEN 'null' THEN 0 WHEN 'number' THEN 1 WHEN 'boolean' THEN 1 ELSE 2 END)",
		"(CASE jsonb_typeof(" + v + ") WHEN 'number' THEN CAST(" + v + " #>> '{}' AS numeric)" +
			" WHEN 'boolean' THEN CASE WHEN " + v + " = 'true' THEN 1 ELSE 0 END END)",
		"(" + v + " #>> '{}') COLLATE \"C\"",
	}
}

// postgresJSONType is SQLite's json_type name of the value: null, true, false,
// integer, real, text, array or object; NULL when missing.
func postgresJSONType(doc, path string) string {
	return postgresJSONOnce(doc, path, "CASE jsonb_typeof(x.v) WHEN 'string' THEN 'text' WHEN 'boolean' THEN CAST(x.v AS text)"+
		" WHEN 'number' THEN CASE WHEN CAST(x.v AS text) ~ '^-?[0-9]+$' THEN 'integer' ELSE 'real' END"+
		" ELSE jsonb_typeof(x.v) END")
}

// postgresJSONHolds: the value is value (a JSON string equal to it as text), or a
// list holding such a string, as SQLite's json_each of a scalar is the scalar and of
// a list its items. The path's lax mode applies the filter to each item of a list.
func postgresJSONHolds(doc, path, value string) string {
	return "jsonb_path_exists(CAST(" + doc + " AS jsonb), CAST(CAST(" + path + " AS text) || ' ? (@ == $v)' AS jsonpath)," +
		" jsonb_build_object('v', CAST(" + value + " AS text)))"
}

// postgresJSONOnce is expr over x.v, the value at path, which it reads once: a `?`
// in path is one argument however often expr names the value.
func postgresJSONOnce(doc, path, expr string) string {
	return "(SELECT " + expr + " FROM (SELECT " + postgresJSONAt(doc, path) + " AS v) x)"
}

// postgresJSONMembers rebuilds a JSON object from the members of doc other than the
// one a top-level path ($.name or $."name") names, plus (when value is not "") that
// member set to value as a JSON string: in key order, without spaces, as the store
// writes objects. Each member's value keeps its text.
func postgresJSONMembers(doc, path, value string) string {
	set := ""
	if value != "" {
		set = " UNION ALL SELECT p.k, coalesce(CAST(to_json(CAST(" + value + " AS text)) AS text), 'null')"
	}
	return "(SELECT CAST(coalesce('{' || string_agg(CAST(to_json(m.k) AS text) || ':' || m.v, ',' ORDER BY m.k COLLATE \"C\") || '}', '{}') AS json)" +
		` FROM (SELECT regexp_replace(CAST(` + path + ` AS text), '^\$\.(?:"(.*)"|(.*))$', '\1\2')) p(k)` +
		" CROSS JOIN LATERAL (SELECT e.key, CAST(e.value AS text) FROM json_each(CAST(" + doc + " AS json)) e WHERE e.key <> p.k" +
		set + ") m(k, v))"
}

// postgresJSONSet is doc with the member at path set to value (text, stored as a
// JSON string).
func postgresJSONSet(doc, path, value string) string { return postgresJSONMembers(doc, path, value) }

// postgresJSONRemove is doc without the member at path.
func postgresJSONRemove(doc, path string) string { return postgresJSONMembers(doc, path, "") }

// postgresFold lowers ASCII letters only, as SQLite's LIKE compares them (ILIKE and
// lower would fold every letter).
func postgresFold(expr string) string {
	return "translate(" + expr + ", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
}

// postgresLike is col LIKE pat ignoring the case of ASCII letters only.
func postgresLike(col, pat string) string {
	return postgresFold("CAST("+col+" AS text)") + " LIKE " + postgresFold(pat) + ` ESCAPE '\'`
}

// postgresSearchQuery is the pattern the trigram index narrows by: the search's LIKE
// pattern, ASCII-folded as the indexed text is.
func postgresSearchQuery(search string) (string, bool) {
	if search == "" || strings.ContainsRune(search, 0) {
		return "", false
	}
	pat := "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(search) + "%"
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, pat), true
}

// postgresLayoutVersion reads how many layout steps have run: 0 before the first.
func postgresLayoutVersion(ctx context.Context, q querier) (int, error) {
	var exists bool
	if err := q.queryRowContext(ctx, "SELECT to_regclass('layout_version') IS NOT NULL").Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var have int
	err := q.queryRowContext(ctx, "SELECT version FROM layout_version").Scan(&have)
	return have, err
}

// postgresBackup is not an SQL statement on PostgreSQL: backups are pg_dump's
// (backup_postgres.go).
func postgresBackup(ctx context.Context, c conn, path string) error {
	return errors.New("a PostgreSQL database is backed up with pg_dump (dataservice backup)")
}
