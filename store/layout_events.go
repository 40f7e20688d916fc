package store

import (
	"strconv"

	"dataservice/store/model"
)

// eventClassesLayout is the layout step, the same text on both engines, that adds the
// built-in permission p_event_admin and the built-in classes _eventrule (what to do
// when data changes) and _schedule (pipelines run on a timer) to every file, new or
// existing, whatever its DB_VERSION: like p_pipeline_admin they came after the seed's
// data-version blocks, whose table is fixed. A permission of that name a user made
// before becomes built-in; a schema name starting with _ is never a user's (a load
// refuses one), so the classes are added as they are. Each class's author and
// author_id fields are written by the store (Apply) with the last writer's name and
// instance id, never by the caller.
const eventClassesLayout = `
INSERT INTO permissions(keyname, displayname, description, is_builtin)
	VALUES('p_event_admin', 'Event admin', 'Create, update, enable, disable and delete event rules (_eventrule)', 1)
	ON CONFLICT(keyname) DO UPDATE SET is_builtin = 1;
INSERT INTO schemas(keyname, displayname, description, is_builtin, p_read, p_create, p_update, p_delete)
	VALUES('_eventrule', 'Event rules', 'Webhooks delivered and pipelines run when instances change', 1,
		'p_event_admin', 'p_event_admin', 'p_event_admin', 'p_event_admin')
	ON CONFLICT(keyname) DO NOTHING;
INSERT INTO schema_fields(classname, keyname, displayname, dataformat, dataformat_ext, cardinal_min, cardinal_max, default_value, sort_order) VALUES
	('_eventrule', 'description', 'Description', 'string', '', 0, 1, NULL, 10),
	('_eventrule', 'schemas', 'Schemas watched', 'string', '', 1, 0, NULL, 20),
	('_eventrule', 'actions', 'Actions (empty: all)', 'string', '', 0, 0, NULL, 30),
	('_eventrule', 'condition', 'Condition', 'text', 'yaml', 0, 1, NULL, 40),
	('_eventrule', 'webhook_url', 'Webhook URL', 'string', '', 0, 1, NULL, 50),
	('_eventrule', 'secret', 'Signing secret (encrypted)', 'secret', 'encrypted', 0, 1, NULL, 60),
	('_eventrule', 'pipeline', 'Pipeline', 'string', '', 0, 1, NULL, 70),
	('_eventrule', 'author', 'Author (last writer)', 'string', '', 0, 1, NULL, 80),
	('_eventrule', 'author_id', 'Author id (the last writer''s instance id)', 'int', '', 0, 1, NULL, 90)
	ON CONFLICT(classname, keyname) DO NOTHING;
INSERT INTO schemas(keyname, displayname, description, is_builtin)
	VALUES('_schedule', 'Schedules', 'Pipelines run on a timer', 1)
	ON CONFLICT(keyname) DO NOTHING;
INSERT INTO schema_fields(classname, keyname, displayname, dataformat, dataformat_ext, cardinal_min, cardinal_max, default_value, sort_order) VALUES
	('_schedule', 'description', 'Description', 'string', '', 0, 1, NULL, 10),
	('_schedule', 'pipeline', 'Pipeline', 'string', '', 1, 1, NULL, 20),
	('_schedule', 'schemas', 'Schemas', 'string', '', 1, 0, NULL, 30),
	('_schedule', 'cron', 'Cron expression', 'string', '', 1, 1, NULL, 40),
	('_schedule', 'timezone', 'Time zone', 'string', '', 0, 1, '"UTC"', 50),
	('_schedule', 'dryrun', 'Dry run', 'boolean', '', 0, 1, 'false', 60),
	('_schedule', 'missed', 'Missed runs (run_once or skip)', 'string', '', 0, 1, '"run_once"', 70),
	('_schedule', 'author', 'Author (last writer)', 'string', '', 0, 1, NULL, 80),
	('_schedule', 'author_id', 'Author id (the last writer''s instance id)', 'int', '', 0, 1, NULL, 90)
	ON CONFLICT(classname, keyname) DO NOTHING;
`

// authoredClasses are the built-in classes whose instances act for somebody later
// (an event rule's pipeline and webhook, a schedule's runs): Apply records the last
// writer in their author field, and they act with that identity's permissions,
// re-read when they act.
var authoredClasses = map[string]bool{"_eventrule": true, "_schedule": true}

// AuthorField is the field of an authored class that holds its last writer.
const AuthorField = "author"

// AuthorIDField is the field of an authored class that holds its last writer's
// instance id (model.Auth.AuthorID): the name alone would let a key revoked and
// created again under it, or a user deleted and created again with the login, act as
// the old one.
const AuthorIDField = "author_id"

// authorIDOf reads in's author_id (0 when it has none).
func authorIDOf(in *Instance) int64 {
	text, _ := model.ScalarText(in.Data[AuthorIDField])
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// IsAuthoredClass reports whether Apply records the last writer of cls's instances.
func IsAuthoredClass(cls string) bool { return authoredClasses[cls] }

// CodeClasses lists the built-in classes the code adds beyond the built-in files.
func CodeClasses() []string { return []string{"_eventrule", "_schedule"} }

// eventsLayout is the layout step, the same text on both engines, that adds the
// events outbox (events.go, event_record.go): one row per event a committed write
// fired, recorded in the write's own transaction and claimed by the delivery workers
// like queue work. id is the event's stable id (a UUID); seq its commit order (every
// write transaction holds the writer lock, so the recording statement's max + 1 is
// new; a purge keeps the highest seq it saw in the registry, so none is given twice). Times used by the claim (next_at, lease_until) are Unix
// milliseconds; the others RFC 3339 text. instance_id is the instance's row id, which
// a rename keeps and no other instance ever takes: an instance's queue follows it
// across renames. events_head finds the oldest pending event of one instance, rule
// and kind (the claim takes only that one); events_list serves the
// lists by status and by rule, newest first.
const eventsLayout = `
CREATE TABLE events (
	id          TEXT PRIMARY KEY,
	seq         BIGINT NOT NULL UNIQUE,
	rule        TEXT NOT NULL,
	kind        TEXT NOT NULL,
	classname   TEXT NOT NULL,
	keyname     TEXT NOT NULL,
	instance_id BIGINT NOT NULL,
	action      TEXT NOT NULL,
	body        TEXT NOT NULL,
	chain       TEXT NOT NULL DEFAULT '[]',
	status      TEXT NOT NULL DEFAULT 'pending',
	attempts    INTEGER NOT NULL DEFAULT 0,
	next_at     BIGINT NOT NULL,
	lease_owner TEXT NOT NULL DEFAULT '',
	lease_until BIGINT NOT NULL DEFAULT 0,
	last_error  TEXT NOT NULL DEFAULT '',
	last_status INTEGER NOT NULL DEFAULT 0,
	created_at  TEXT NOT NULL,
	finished_at TEXT NOT NULL DEFAULT '',
	task        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_head ON events(status, rule, kind, instance_id, seq);
CREATE INDEX events_list ON events(status, seq);
CREATE INDEX events_rule ON events(rule, seq);
`

// eventsClaimLayout is the layout step, the same text on both engines, that adds the
// indexes of the events claim: events_due gives one queue's (a rule's webhook or its
// pipeline) pending events in commit order (a claim takes each queue's heads apart, so
// a long backlog of one rule never
// hides another's), events_next the pending events due (the claim's first look,
// without the write lock), events_lease those under a lease (counted per rule).
const eventsClaimLayout = `
CREATE INDEX events_due ON events(status, rule, kind, seq);
CREATE INDEX events_next ON events(status, next_at);
CREATE INDEX events_lease ON events(status, lease_until);
`
