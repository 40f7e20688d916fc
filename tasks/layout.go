package tasks

import "dataservice/store"

// The queue owns its table: these are the tasks table's layout steps, registered with
// store so every program that links this package gets the table when it opens a
// file. Append-only: never edit a released step, append a new one. table is the
// door every statement of the queue goes through (store.Table): the tasks table only.
var table = registerLayout()

func registerLayout() *store.Table {
	return store.RegisterLayout("tasks",
		// 1: the tasks table as the first released layout made it (files made then
		// already have it and are left untouched; new files get it here).
		`
CREATE TABLE IF NOT EXISTS tasks (
	handle         TEXT PRIMARY KEY,
	kind           TEXT NOT NULL,
	params         TEXT NOT NULL DEFAULT '{}',
	auth           TEXT NOT NULL DEFAULT '{}',
	owner_type     TEXT NOT NULL DEFAULT '',
	owner_id       TEXT NOT NULL DEFAULT '',
	status         TEXT NOT NULL,
	progress_total INTEGER NOT NULL DEFAULT 0,
	progress_done  INTEGER NOT NULL DEFAULT 0,
	checkpoint     TEXT NOT NULL DEFAULT '{}',
	result         TEXT NOT NULL DEFAULT '{}',
	error          TEXT,
	created_at     TEXT NOT NULL,
	started_at     TEXT,
	finished_at    TEXT,
	-- Set by a cancel request for a running task; the runner stops after its batch.
	cancel_requested INTEGER NOT NULL DEFAULT 0,
	-- The runner holding a running task, and until when (renewed with every batch).
	lease_owner    TEXT NOT NULL DEFAULT '',
	lease_until    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tasks_status ON tasks(status, created_at);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks(owner_type, owner_id, created_at);
`)
}
