package store

// sqliteLayout is the append-only list of SQLite's table-layout changes; PRAGMA
// user_version counts how many have run. Never edit an entry once released: append a
// new one.
var sqliteLayout = []string{
	// 1: the documented on-disk format (users inspect the file with sqlite3: never
	// rename these tables or columns). As released, this step also created the tasks
	// table and its indexes tasks_status and tasks_owner; the tasks package owns that
	// table now (its own layout step 1 creates it where missing, so files made before
	// and after this change end in the same layout).
	`
CREATE TABLE registry (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
CREATE TABLE configuration (
	keyname       TEXT PRIMARY KEY,
	value         TEXT,
	default_value TEXT,
	description   TEXT
);
CREATE TABLE schemas (
	id           INTEGER PRIMARY KEY,
	keyname      TEXT NOT NULL UNIQUE,
	displayname  TEXT NOT NULL DEFAULT '',
	description  TEXT NOT NULL DEFAULT '',
	keyname_mode TEXT NOT NULL DEFAULT 'edit',
	is_enabled   INTEGER NOT NULL DEFAULT 1,
	is_builtin   INTEGER NOT NULL DEFAULT 0,
	p_read       TEXT,
	p_create     TEXT,
	p_update     TEXT,
	p_delete     TEXT,
	p_admin      TEXT,
	options      TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE schema_fields (
	id             INTEGER PRIMARY KEY,
	classname      TEXT NOT NULL REFERENCES schemas(keyname) ON DELETE CASCADE ON UPDATE CASCADE,
	keyname        TEXT NOT NULL,
	displayname    TEXT NOT NULL DEFAULT '',
	description    TEXT NOT NULL DEFAULT '',
	dataformat     TEXT NOT NULL,
	dataformat_ext TEXT NOT NULL DEFAULT '',
	cardinal_min   INTEGER NOT NULL DEFAULT 0,
	cardinal_max   INTEGER NOT NULL DEFAULT 1,
	default_value  TEXT,
	sort_order     INTEGER NOT NULL DEFAULT 0,
	is_enabled     INTEGER NOT NULL DEFAULT 1,
	options        TEXT NOT NULL DEFAULT '{}',
	UNIQUE(classname, keyname)
);
CREATE TABLE instances (
	id          INTEGER PRIMARY KEY,
	classname   TEXT NOT NULL,
	keyname     TEXT NOT NULL,
	displayname TEXT NOT NULL DEFAULT '',
	is_enabled  INTEGER NOT NULL DEFAULT 1,
	data        TEXT NOT NULL DEFAULT '{}',
	created_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL,
	UNIQUE(classname, keyname)
);
CREATE INDEX instances_classname_id ON instances(classname, id);
CREATE TABLE permissions (
	id          INTEGER PRIMARY KEY,
	keyname     TEXT NOT NULL UNIQUE,
	displayname TEXT NOT NULL DEFAULT '',
	description TEXT NOT NULL DEFAULT '',
	is_builtin  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE revisions (
	id         INTEGER PRIMARY KEY,
	classname  TEXT NOT NULL,
	keyname    TEXT NOT NULL,
	action     TEXT NOT NULL,
	before     TEXT,
	after      TEXT,
	author     TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE INDEX revisions_object ON revisions(classname, keyname, id);
`,
	// 2: a counter of committed schema changes, so every process's schema cache sees
	// changes made by the others.
	`
CREATE TABLE schema_generation (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	generation INTEGER NOT NULL
);
INSERT INTO schema_generation(id, generation) VALUES(1, 0);
`,
	// 3: web console sessions. Only a hash of the token is stored; times are Unix seconds.
	`
CREATE TABLE sessions (
	id         INTEGER PRIMARY KEY,
	token_hash TEXT NOT NULL UNIQUE,
	user_id    INTEGER NOT NULL,
	login      TEXT NOT NULL,
	csrf       TEXT NOT NULL,
	address    TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id);
`,
	// 4: per-schema instance counts, kept by triggers in the transactions that write
	// instances (so every write path keeps them), and built here for existing files.
	// (A trigram FTS5 index kept the same way was tried and left out: it made every
	// instance write many times slower in this SQLite build, and a sequence of loads
	// in the hostile-input suite left it failing integrity_check: as found later, FTS5's
	// check run on a pooled connection that had cached the index's structure before
	// other writes, not a damaged file. Layout 10 indexes search another way.)
	`
CREATE TABLE instance_counts (
	classname TEXT PRIMARY KEY,
	n         INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO instance_counts(classname, n) SELECT classname, count(*) FROM instances GROUP BY classname;
CREATE TRIGGER instances_count_insert AFTER INSERT ON instances BEGIN
	INSERT INTO instance_counts(classname, n) VALUES(NEW.classname, 1)
		ON CONFLICT(classname) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER instances_count_delete AFTER DELETE ON instances BEGIN
	UPDATE instance_counts SET n = n - 1 WHERE classname = OLD.classname;
END;
CREATE TRIGGER instances_count_move AFTER UPDATE OF classname ON instances
	WHEN NEW.classname <> OLD.classname BEGIN
	UPDATE instance_counts SET n = n - 1 WHERE classname = OLD.classname;
	INSERT INTO instance_counts(classname, n) VALUES(NEW.classname, 1)
		ON CONFLICT(classname) DO UPDATE SET n = n + 1;
END;
`,
	// 5: configuration changes bump the generation counter: configuration is cached in
	// memory with the schemas, and every process sees a change at its next read.
	`
CREATE TRIGGER configuration_insert AFTER INSERT ON configuration BEGIN
	UPDATE schema_generation SET generation = generation + 1;
END;
CREATE TRIGGER configuration_update AFTER UPDATE ON configuration BEGIN
	UPDATE schema_generation SET generation = generation + 1;
END;
CREATE TRIGGER configuration_delete AFTER DELETE ON configuration BEGIN
	UPDATE schema_generation SET generation = generation + 1;
END;
`,
	// 6: instance ids are never reused (a deleted user's id must not pass to a new user
	// with its tasks and sessions). instance_ids.high is the highest id ever given out
	// that may no longer be in instances: deletes raise it, and inserts take
	// max(high, max(id)) + 1 (nextInstanceID). For existing files it starts above every
	// id still named by instances, tasks or sessions. An insert that would reuse an id
	// anyway (SQL written by hand without nextInstanceID) is refused.
	`
CREATE TABLE instance_ids (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	high INTEGER NOT NULL
);
INSERT INTO instance_ids(id, high) VALUES(1, max(
	coalesce((SELECT max(id) FROM instances), 0),
	coalesce((SELECT max(CAST(owner_id AS INTEGER)) FROM tasks
		WHERE owner_id <> '' AND owner_id NOT GLOB '*[^0-9]*'), 0),
	coalesce((SELECT max(user_id) FROM sessions), 0)));
CREATE TRIGGER instances_id_high AFTER DELETE ON instances
	WHEN OLD.id > (SELECT high FROM instance_ids) BEGIN
	UPDATE instance_ids SET high = OLD.id;
END;
CREATE TRIGGER instances_id_fresh AFTER INSERT ON instances
	WHEN NEW.id <= (SELECT high FROM instance_ids) BEGIN
	SELECT RAISE(ABORT, 'instance id reused');
END;
`,
	// 7: the built-in permission p_pipeline_admin (writing _pipeline), which came after
	// the seed's data-version blocks: added to every file as built-in; a permission of
	// that name made by a user before becomes built-in.
	`
INSERT INTO permissions(keyname, displayname, description, is_builtin)
	VALUES('p_pipeline_admin', 'Pipeline admin', 'Create, update, enable, disable and delete pipelines (_pipeline)', 1)
	ON CONFLICT(keyname) DO UPDATE SET is_builtin = 1;
`,
	// 8: per-/16 counts of ipam_ip addresses (keynames of 8 hex digits; block = the first
	// four), kept by triggers like instance_counts, so the usage of a large subnet sums
	// a few block counts instead of counting every address in the index. Written to
	// run again on a file that has it (tests rewind user_version past it).
	`
CREATE TABLE IF NOT EXISTS ipam_blocks (
	block TEXT PRIMARY KEY,
	n     INTEGER NOT NULL
) WITHOUT ROWID;
DELETE FROM ipam_blocks;
INSERT INTO ipam_blocks(block, n) SELECT substr(keyname, 1, 4), count(*) FROM instances
	WHERE classname = 'ipam_ip' AND length(keyname) = 8 AND keyname NOT GLOB '*[^0-9a-f]*' GROUP BY 1;
CREATE TRIGGER IF NOT EXISTS ipam_blocks_insert AFTER INSERT ON instances
	WHEN NEW.classname = 'ipam_ip' AND length(NEW.keyname) = 8 AND NEW.keyname NOT GLOB '*[^0-9a-f]*' BEGIN
	INSERT INTO ipam_blocks(block, n) VALUES(substr(NEW.keyname, 1, 4), 1)
		ON CONFLICT(block) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS ipam_blocks_delete AFTER DELETE ON instances
	WHEN OLD.classname = 'ipam_ip' AND length(OLD.keyname) = 8 AND OLD.keyname NOT GLOB '*[^0-9a-f]*' BEGIN
	UPDATE ipam_blocks SET n = n - 1 WHERE block = substr(OLD.keyname, 1, 4);
END;
CREATE TRIGGER IF NOT EXISTS ipam_blocks_move AFTER UPDATE OF classname, keyname ON instances
	WHEN OLD.classname = 'ipam_ip' OR NEW.classname = 'ipam_ip' BEGIN
	UPDATE ipam_blocks SET n = n - 1 WHERE block = substr(OLD.keyname, 1, 4)
		AND OLD.classname = 'ipam_ip' AND length(OLD.keyname) = 8 AND OLD.keyname NOT GLOB '*[^0-9a-f]*';
	INSERT INTO ipam_blocks(block, n) SELECT substr(NEW.keyname, 1, 4), 1
		WHERE NEW.classname = 'ipam_ip' AND length(NEW.keyname) = 8 AND NEW.keyname NOT GLOB '*[^0-9a-f]*'
		ON CONFLICT(block) DO UPDATE SET n = n + 1;
END;
`,
	// 9: the history of one class, newest first, read without sorting the class's rows
	// (the console's revisions page filtered by class pages by id within a class).
	// IF NOT EXISTS: a file whose layout version was set back (as upgrade tests do) may
	// hold it already.
	`
CREATE INDEX IF NOT EXISTS revisions_class ON revisions(classname, id);
`,
	// 10: the search index: a trigram FTS5 index of every instance's keyname,
	// displayname and data (the stored JSON text), built here for existing files. The
	// index keeps its own copy of the text it indexed (not external content), so
	// removing a row's entry never depends on the instances row still holding that
	// text; detail=none keeps only which rows hold a trigram. No trigger writes it:
	// FTS5 flushes its pending rows at every statement savepoint, and the instances
	// statements open one (their triggers), which made each instance write a segment
	// of its own. Instead the triggers note the ids written in instances_search_dirty,
	// and every store write transaction re-indexes those rows in one pass just before
	// it commits (reindexDirty; since layout 16 a background catch-up indexes them
	// instead, searchcatchup.go). A search treats a non-empty dirty list (rows written
	// by SQL outside the store) by reading rows as before, so results never depend on
	// it. automerge 8 (instead of FTS5's 4) merges the index's segments a level at
	// a time in fewer, larger steps: less merging work for each write, at most a few
	// dozen segments for a search to read at a million instances. The step first
	// drops what an earlier trial of such an index (never released) left under the
	// same names, so it also runs again on a file whose version was set back.
	`
DROP TRIGGER IF EXISTS instances_search_insert;
DROP TRIGGER IF EXISTS instances_search_delete;
DROP TRIGGER IF EXISTS instances_search_update;
DROP TABLE IF EXISTS instances_search_dirty;
DROP TABLE IF EXISTS instances_search;
CREATE VIRTUAL TABLE instances_search USING fts5(keyname, displayname, data,
	tokenize='trigram', detail=none);
INSERT INTO instances_search(instances_search, rank) VALUES('automerge', 8);
INSERT INTO instances_search(rowid, keyname, displayname, data)
	SELECT id, keyname, displayname, data FROM instances ORDER BY id;
CREATE TABLE instances_search_dirty (
	id INTEGER PRIMARY KEY
);
CREATE TRIGGER instances_search_insert AFTER INSERT ON instances BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(NEW.id) ON CONFLICT(id) DO NOTHING;
END;
CREATE TRIGGER instances_search_delete AFTER DELETE ON instances BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(OLD.id) ON CONFLICT(id) DO NOTHING;
END;
CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(OLD.id) ON CONFLICT(id) DO NOTHING;
	INSERT INTO instances_search_dirty(id) VALUES(NEW.id) ON CONFLICT(id) DO NOTHING;
END;
`,
	// 11: the nodes table: every serving process (node) records itself and renews
	// last_seen while it runs (heartbeat), so a node starting beside another running a
	// different version refuses to serve, and one whose settings differ is warned.
	// Times are Unix milliseconds. node_salt is the one salt of the settings hashes
	// (settings holds argon2id hashes, never a setting's value).
	`
CREATE TABLE nodes (
	id         TEXT PRIMARY KEY,
	host       TEXT NOT NULL,
	version    TEXT NOT NULL,
	settings   TEXT NOT NULL DEFAULT '{}',
	started_at INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL
);
CREATE TABLE node_salt (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	salt TEXT NOT NULL
);
`,
	// 12: the credential throttle's refusals (throttle.go), in the database so every
	// process sharing it counts them together. One row per address, login or login
	// at an address (kind); times are Unix nanoseconds, oldest first, last the
	// newest. The index serves the expiry and the bound per kind.
	`
CREATE TABLE throttle (
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	times TEXT NOT NULL,
	last INTEGER NOT NULL,
	PRIMARY KEY (kind, name)
);
CREATE INDEX throttle_last ON throttle(kind, last);
`,
	// 13: the built-in permission p_event_admin and the built-in classes _eventrule
	// and _schedule (layout_events.go).
	eventClassesLayout,
	// 14: the events outbox (layout_events.go).
	eventsLayout,
	// 15: the indexes of the events claim (layout_events.go).
	eventsClaimLayout,
	// 16: the search index catches up in the background (searchcatchup.go) instead of
	// in every write transaction, so the list of rows to index records when each row was
	// listed (Unix milliseconds; the first listing wins while the row waits): the age
	// of the oldest is how far the index lags behind the data. Rows listed before this
	// step count from now.
	`
ALTER TABLE instances_search_dirty ADD COLUMN listed_at INTEGER NOT NULL DEFAULT 0;
UPDATE instances_search_dirty SET listed_at = ` + sqliteNowMillis + `;
DROP TRIGGER instances_search_insert;
DROP TRIGGER instances_search_delete;
DROP TRIGGER instances_search_update;
CREATE TRIGGER instances_search_insert AFTER INSERT ON instances BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(NEW.id, ` + sqliteNowMillis + `) ON CONFLICT(id) DO NOTHING;
END;
CREATE TRIGGER instances_search_delete AFTER DELETE ON instances BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(OLD.id, ` + sqliteNowMillis + `) ON CONFLICT(id) DO NOTHING;
END;
CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(OLD.id, ` + sqliteNowMillis + `) ON CONFLICT(id) DO NOTHING;
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(NEW.id, ` + sqliteNowMillis + `) ON CONFLICT(id) DO NOTHING;
END;
`,
	// 17: an update lists its row once: the old id only when the update changed the id
	// (an update of one row listed the same id twice, the second a no-op that still
	// searched the list and read the clock: about a third of what listing costs a write).
	`
DROP TRIGGER instances_search_update;
CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(NEW.id, ` + sqliteNowMillis + `) ON CONFLICT(id) DO NOTHING;
	INSERT INTO instances_search_dirty(id, listed_at) SELECT OLD.id, ` + sqliteNowMillis + `
		WHERE OLD.id IS NOT NEW.id ON CONFLICT(id) DO NOTHING;
END;
`,
	// 18: revision rows of instance updates record only what changed (revision_delta.go):
	// delta says which form a row holds (0: the whole object before and after, as every
	// row written before this step; 1: only the changed parts). Adding a column with a
	// constant default rewrites no row.
	`
ALTER TABLE revisions ADD COLUMN delta INTEGER NOT NULL DEFAULT 0;
`,
	// 19: the list of rows to index keeps no listing time: reading the clock for
	// listed_at was about a third of what listing a row costs a write (how long the
	// index has lagged is kept by the processes that watch the list instead:
	// searchindex.go, SearchLag). A listed row may be staged instead (searchstage.go):
	// the catch-up indexes its keyname, displayname and data in instances_search_staged
	// (a small trigram index that keeps no text) and sets staged to 1, and a write of
	// the row sets it to 2 (its entry there is stale until staged again, and goes when
	// the row is indexed), so a search asks that small index for the staged rows
	// instead of reading each one. A write still runs one statement per listed row. An
	// update lists its
	// old id in a trigger of its own, which only an UPDATE that names id considers (the
	// store never changes an id).
	`
DROP TRIGGER instances_search_insert;
DROP TRIGGER instances_search_delete;
DROP TRIGGER instances_search_update;
ALTER TABLE instances_search_dirty DROP COLUMN listed_at;
ALTER TABLE instances_search_dirty ADD COLUMN staged INTEGER NOT NULL DEFAULT 0;
CREATE VIRTUAL TABLE instances_search_staged USING fts5(keyname, displayname, data,
	content='', contentless_delete=1, tokenize='trigram', detail=none);
CREATE TRIGGER instances_search_insert AFTER INSERT ON instances BEGIN
	` + sqliteListID("NEW.id") + `
END;
CREATE TRIGGER instances_search_delete AFTER DELETE ON instances BEGIN
	` + sqliteListID("OLD.id") + `
END;
CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	` + sqliteListID("NEW.id") + `
END;
CREATE TRIGGER instances_search_move AFTER UPDATE OF id ON instances WHEN OLD.id IS NOT NEW.id BEGIN
	` + sqliteListID("OLD.id") + `
END;
`,
	// 20: an UPDATE no longer lists its row by trigger: the store lists the instances it
	// updates itself, one statement a transaction (searchlist.go). The trigger's program
	// and the statement journal it needs, run for every updated row, cost a pipeline run
	// about a fifth of its rate at a million instances. Inserts and deletes keep their
	// triggers (a new or removed row costs far more than its listing), and so does an
	// id's change (instances_search_move; the store never changes an id).
	`
DROP TRIGGER instances_search_update;
`,
}

// sqliteListID lists the instance id for the search index (layout 19): a new row of
// the list (staged 0), or, when it is listed and staged already, a row whose staged
// entry is stale (staged 2).
func sqliteListID(id string) string {
	return `INSERT INTO instances_search_dirty(id) VALUES(` + id + `) ON CONFLICT(id) DO UPDATE
		SET staged = 2 WHERE staged = 1;`
}

// sqliteNowMillis is the current time in Unix milliseconds, in SQL.
const sqliteNowMillis = `CAST(unixepoch('subsec') * 1000 AS INTEGER)`

// sqliteNextInstanceID is the id a new instance takes: above every id ever given out.
const sqliteNextInstanceID = `(SELECT max(high, coalesce((SELECT max(id) FROM instances), 0)) + 1 FROM instance_ids)`

// sqliteInsertInstance inserts an instance under a new id (sqliteNextInstanceID).
const sqliteInsertInstance = `INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data, created_at, updated_at)
	VALUES(` + sqliteNextInstanceID + `, ?, ?, ?, ?, ?, ?, ?)`
