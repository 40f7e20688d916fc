package store

import (
	"strings"
	"unicode/utf8"
)

// SQLite's search index (layout 10) is a trigram FTS5 index; these are its statements
// and its query syntax, which the SQLite dialect gives the search (search.go) and the
// re-indexing (searchindex.go).

// SearchBacklogCheck is what a search runs first: the number of rows listed for the
// index and not indexed yet, counted up to `?` (SearchBacklogLimit + 1). Exported so
// that benchmark floors run the same SQL.
const SearchBacklogCheck = `SELECT count(*) FROM (SELECT 1 FROM instances_search_dirty LIMIT ?)`

// sqliteCatchUp are the statements of a catch-up batch (searchindex.go): they index
// the listed rows with ids up to `?` and take them off the list (and those ever staged,
// staged 1 or 2, out of the staged index, searchstage.go); the last (no argument)
// flushes the index.
var sqliteCatchUp = sqliteReindex("d.id <= ?")

// sqliteReindex are the re-indexing statements over the listed rows that satisfy
// cond (a condition on d.id; "" for all of them).
func sqliteReindex(cond string) []string {
	and, where := "", ""
	if cond != "" {
		and, where = " AND "+cond, " WHERE "+cond
	}
	return []string{
		`DELETE FROM instances_search WHERE rowid IN (SELECT d.id FROM instances_search_dirty d
		WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = d.id)` + and + `)`,
		`INSERT OR REPLACE INTO instances_search(rowid, keyname, displayname, data)
		SELECT i.id, i.keyname, i.displayname, i.data
		FROM instances_search_dirty d JOIN instances i ON i.id = d.id` + where + ` ORDER BY d.id`,
		`DELETE FROM instances_search_staged WHERE rowid IN (SELECT d.id FROM instances_search_dirty d
		WHERE d.staged` + and + `)`,
		`DELETE FROM instances_search_dirty AS d` + where,
		`INSERT INTO instances_search(instances_search) VALUES('flush')`,
	}
}

// sqliteStageWaiting reads how many rows are listed, counted up to `?`, and how many
// of those are not staged (searchstage.go: staged is 0, never staged, or 2, written
// since it was).
const sqliteStageWaiting = `SELECT count(*), coalesce(sum(staged <> 1), 0)
	FROM (SELECT staged FROM instances_search_dirty LIMIT ?)`

// sqliteStage stages the `?` newest listed rows that are not staged: their entries
// in the staged index go (a row staged before and written since), the rows that still
// exist are indexed there, in rowid order (FTS5 starts a new segment whenever a rowid
// is lower than the last it wrote), and the list marks them all staged (a deleted row
// is staged with no entry). The three statements select the same rows: nothing else
// writes between them.
var sqliteStage = []string{
	`DELETE FROM instances_search_staged WHERE rowid IN (` + sqliteStageRows + `)`,
	`INSERT INTO instances_search_staged(rowid, keyname, displayname, data)
	SELECT i.id, i.keyname, i.displayname, i.data FROM (` + sqliteStageRows + `) AS d
	JOIN instances i ON i.id = d.id ORDER BY d.id`,
	`UPDATE instances_search_dirty SET staged = 1 WHERE id IN (` + sqliteStageRows + `)`,
}

// sqliteStageRows are the `?` newest listed rows not staged.
const sqliteStageRows = `SELECT id FROM instances_search_dirty WHERE staged <> 1 ORDER BY id DESC LIMIT ?`

// maxTrigrams bounds the trigrams a search asks the index for: a long search is
// narrowed by its first ones (the LIKE check sees the whole search).
const maxTrigrams = 32

// indexQuery is the FTS5 query for a search: every distinct trigram of it (at most
// maxTrigrams), each a quoted string, joined by AND (the index keeps no positions; the LIKE check that
// follows does the rest). ok is false where the index cannot narrow a search
// exactly as LIKE would: fewer than three characters (no trigram), text that is not
// valid UTF-8, or a NUL character.
func indexQuery(search string) (q string, ok bool) {
	if utf8.RuneCountInString(search) < 3 || !utf8.ValidString(search) || strings.ContainsRune(search, 0) {
		return "", false
	}
	r := []rune(search)
	seen := map[string]bool{}
	var b strings.Builder
	for i := 0; i+3 <= len(r) && len(seen) < maxTrigrams; i++ {
		tri := string(r[i : i+3])
		if seen[tri] {
			continue
		}
		seen[tri] = true
		if b.Len() > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(`"` + strings.ReplaceAll(tri, `"`, `""`) + `"`)
	}
	return b.String(), true
}

// SearchListSQL is SQLite's statement listing the instance ids of the JSON array `?`
// for the search index (staged ones made stale): the one statement a transaction that
// updated instances runs before it commits (searchlist.go). Benchmarks' floors run it
// too.
const SearchListSQL = `INSERT INTO instances_search_dirty(id) SELECT value FROM json_each(?) WHERE true
	ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`

// sqliteListWhere lists the instances a condition (%s) selects, at once.
const sqliteListWhere = `INSERT INTO instances_search_dirty(id) SELECT id FROM instances WHERE %s
	ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`

// sqliteRawListingOn lists for the search index the rows that statements run as
// written update, on the connection that creates it alone (TEMP); sqliteRawListingOff
// drops it.
const (
	sqliteRawListingOn = `CREATE TEMP TRIGGER search_list_update AFTER UPDATE OF id, keyname, displayname, data
	ON main.instances BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(NEW.id) ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1;
END`
	sqliteRawListingOff = "DROP TRIGGER temp.search_list_update"
)

// sqliteMergeStart and sqliteMergeMore merge the search index (searchmerge.go): a
// negative page count puts every segment on one level first and merges as few as two;
// a positive one goes on with a merge begun. 500 pages of FTS5's 4,050 bytes: about
// 2 MB written a transaction.
const (
	sqliteMergeStart = `INSERT INTO instances_search(instances_search, rank) VALUES('merge', -500)`
	sqliteMergeMore  = `INSERT INTO instances_search(instances_search, rank) VALUES('merge', 500)`
)
