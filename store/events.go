package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// The statuses of an event.
const (
	EventPending   = "pending"
	EventDelivered = "delivered"
	EventDead      = "dead"
)

// The kinds of an event: what its rule does with it.
const (
	EventWebhook  = "webhook"
	EventPipeline = "pipeline"
)

// ErrLeaseLost is the error of an acknowledgement or failure of an event whose lease
// the caller no longer holds (another worker claimed it after the lease expired, or it
// is no longer pending): the caller's outcome is not recorded.
var ErrLeaseLost = model.Errorf(model.EConflict, "event lease lost")

// Event is one row of the events outbox: what a committed write fired for one rule.
type Event struct {
	ID, Rule, Kind, Classname, Keyname, Action string
	// InstanceID is the row id of the instance written (kept across its renames,
	// never another instance's): the events of one instance, rule and kind are
	// delivered in commit order.
	InstanceID int64
	// Seq is the commit order of the write that recorded the event.
	Seq int64
	// Body is the JSON delivery body, fixed when the event was recorded. A claim
	// and Event read it; lists do not (empty).
	Body []byte
	// Chain are the rules that led to the write, this event's rule last.
	Chain      []string
	Status     string // EventPending, EventDelivered, EventDead
	Attempts   int
	NextAt     time.Time
	LastError  string
	LastStatus int
	CreatedAt  string
	FinishedAt string
	// Task is the handle of the task a pipeline event submitted.
	Task string
}

// eventListCols are an event's columns but its body (lists); eventCols all of them.
const (
	eventListCols = "id, seq, rule, kind, classname, keyname, instance_id, action, chain, status, attempts, next_at, " +
		"last_error, last_status, created_at, finished_at, task"
	eventCols = eventListCols + ", body"
)

// scanEvent scans the columns eventListCols, and the body after them when withBody.
func scanEvent(r scanner, withBody bool) (*Event, error) {
	e := &Event{}
	var body, chain string
	var next int64
	dest := []any{&e.ID, &e.Seq, &e.Rule, &e.Kind, &e.Classname, &e.Keyname, &e.InstanceID, &e.Action, &chain,
		&e.Status, &e.Attempts, &next, &e.LastError, &e.LastStatus, &e.CreatedAt, &e.FinishedAt, &e.Task}
	if withBody {
		dest = append(dest, &body)
	}
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	e.NextAt = time.UnixMilli(next).UTC()
	if withBody {
		e.Body = []byte(body)
	}
	if err := json.Unmarshal([]byte(chain), &e.Chain); err != nil {
		return nil, fmt.Errorf("event %s: chain: %w", e.ID, err)
	}
	return e, nil
}

// ClaimEvents leases up to limit due pending events for owner. Each rule has two
// queues, its webhook's and its pipeline's, so a receiver that is down or slow holds
// back no pipeline run. Per queue: only each instance's oldest pending event (commit
// order per instance, which a rename keeps), at most perRule of them, oldest first;
// across processes and PostgreSQL nodes no event is leased twice. An event whose
// lease expired is due again. perRule counts the queue's events leased by anyone and
// not yet expired, so one slow receiver holds at most perRule deliveries while the
// other queues' events flow. owner should name the worker's claim alone (its id and a
// claim number, as a task's lease does), so a worker whose lease was taken over
// cannot acknowledge under the new one.
func (db *DB) ClaimEvents(ctx context.Context, owner string, lease time.Duration, limit, perRule int) ([]*Event, error) {
	if owner == "" || lease <= 0 || limit <= 0 || perRule <= 0 {
		return nil, fmt.Errorf("claim events: owner, lease, limit and perRule must be set")
	}
	now := db.Now().UnixMilli()
	until := now + lease.Milliseconds()
	// The queues with events due and room for more, oldest first, read without the
	// write lock: a poll that finds nothing due takes none (the workers poll often,
	// and every write transaction waits for the writer).
	due, err := dueQueues(ctx, db, now, perRule)
	if err != nil || len(due) == 0 {
		return nil, err
	}
	var out []*Event
	err = db.WithTx(ctx, func(tx *Tx) error {
		busy, err := leasedPerQueue(ctx, tx, now)
		if err != nil {
			return err
		}
		// Each queue's heads apart, so a queue with a long backlog (a slow receiver)
		// never hides another's events: per queue, each instance's oldest pending
		// event when it is due and not leased, oldest first. The engine's row lock
		// (SKIP LOCKED) keeps a claim from taking a row another claim holds; every
		// write transaction also holds the writer lock.
		var ids []any
		for _, q := range due {
			room := min(perRule-busy[q], limit-len(ids))
			if room <= 0 {
				continue
			}
			rows, err := tx.queryContext(ctx, `SELECT h.id FROM events h
				WHERE h.status = 'pending' AND h.rule = ? AND h.kind = ? AND h.next_at <= ? AND h.lease_until < ?
				AND NOT EXISTS (SELECT 1 FROM events o WHERE o.status = 'pending' AND o.rule = h.rule
					AND o.kind = h.kind AND o.instance_id = h.instance_id AND o.seq < h.seq)
				ORDER BY h.seq LIMIT ?`+db.dia.skipLocked, q.rule, q.kind, now, now, room)
			if err != nil {
				return fmt.Errorf("claim events: %w", err)
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return fmt.Errorf("claim events: %w", err)
				}
				ids = append(ids, id)
			}
			if err := rows.Close(); err != nil {
				return fmt.Errorf("claim events: %w", err)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		args := append([]any{owner, until, now}, ids...)
		rows, err := tx.queryContext(ctx, `UPDATE events SET lease_owner = ?, lease_until = ?
			WHERE status = 'pending' AND lease_until < ? AND id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)
			RETURNING `+eventCols, args...)
		if err != nil {
			return fmt.Errorf("claim events: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEvent(rows, true)
			if err != nil {
				return fmt.Errorf("claim events: %w", err)
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	sortEventsBySeq(out)
	return out, nil
}

// defaultMaxDueQueues bounds the queues one claim looks at (the oldest due first),
// unless the database sets another bound (DB.maxDueQueues, tests only).
const defaultMaxDueQueues = 1000

// eventQueue is one rule's queue of one kind.
type eventQueue struct{ rule, kind string }

// dueQueues lists the queues with pending events due and not leased, and fewer than
// perRule events under a lease (a queue at its bound takes nothing, and must not
// take the place of one that can: however many queues wait on slow receivers, the
// others are looked at), the queue of the oldest such event first (read on the read
// pool).
func dueQueues(ctx context.Context, db *DB, now int64, perRule int) ([]eventQueue, error) {
	rows, err := db.reader().queryContext(ctx, `SELECT d.rule, d.kind FROM events d
		WHERE d.status = 'pending' AND d.next_at <= ? AND d.lease_until < ?
		GROUP BY d.rule, d.kind
		HAVING (SELECT count(*) FROM events l WHERE l.status = 'pending' AND l.rule = d.rule AND l.kind = d.kind
			AND l.lease_until >= ?) < ?
		ORDER BY min(d.seq) LIMIT ?`, now, now, now, perRule, cmp.Or(db.maxDueQueues, defaultMaxDueQueues))
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	defer rows.Close()
	var due []eventQueue
	for rows.Next() {
		var q eventQueue
		if err := rows.Scan(&q.rule, &q.kind); err != nil {
			return nil, fmt.Errorf("claim events: %w", err)
		}
		due = append(due, q)
	}
	return due, rows.Err()
}

// leasedPerQueue counts each queue's pending events under an unexpired lease.
func leasedPerQueue(ctx context.Context, tx *Tx, now int64) (map[eventQueue]int, error) {
	rows, err := tx.queryContext(ctx, `SELECT rule, kind, count(*) FROM events
		WHERE status = 'pending' AND lease_until >= ? GROUP BY rule, kind`, now)
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	defer rows.Close()
	busy := map[eventQueue]int{}
	for rows.Next() {
		var q eventQueue
		var n int
		if err := rows.Scan(&q.rule, &q.kind, &n); err != nil {
			return nil, fmt.Errorf("claim events: %w", err)
		}
		busy[q] = n
	}
	return busy, rows.Err()
}

func sortEventsBySeq(es []*Event) {
	slices.SortFunc(es, func(a, b *Event) int { return cmp.Compare(a.Seq, b.Seq) })
}

// AckEvent marks a leased event delivered (task: the handle a pipeline event
// submitted). The lease must still be owner's: ErrLeaseLost otherwise. A lease that
// expired while nobody claimed the event again is still the owner's, so a delivery
// that took longer than its lease is recorded rather than sent again.
func (db *DB) AckEvent(ctx context.Context, id, owner, task string) error {
	return db.leasedEventWrite(ctx, "ack", id, owner, `UPDATE events SET status = 'delivered', finished_at = ?, task = ?,
		lease_owner = '', lease_until = 0 WHERE id = ? AND status = 'pending' AND lease_owner = ?`,
		db.now(), task, id, owner)
}

// FailEvent records a failed attempt: attempts+1, the status and error (clipped, no
// secret), and either the next attempt's time or dead. The lease must still be
// owner's (ErrLeaseLost otherwise).
func (db *DB) FailEvent(ctx context.Context, id, owner string, status int, errText string, next time.Time, dead bool) error {
	errText = clip.Text(errText)
	if dead {
		return db.leasedEventWrite(ctx, "fail", id, owner, `UPDATE events SET status = 'dead', attempts = attempts + 1,
			last_status = ?, last_error = ?, finished_at = ?, lease_owner = '', lease_until = 0
			WHERE id = ? AND status = 'pending' AND lease_owner = ?`, status, errText, db.now(), id, owner)
	}
	return db.leasedEventWrite(ctx, "fail", id, owner, `UPDATE events SET attempts = attempts + 1,
		last_status = ?, last_error = ?, next_at = ?, lease_owner = '', lease_until = 0
		WHERE id = ? AND status = 'pending' AND lease_owner = ?`, status, errText, next.UnixMilli(), id, owner)
}

// leasedEventWrite runs an update of the event id that holds only while owner leases
// it: not found, or ErrLeaseLost.
func (db *DB) leasedEventWrite(ctx context.Context, what, id, owner, query string, args ...any) error {
	if owner == "" {
		return fmt.Errorf("%s event %s: %w", what, id, ErrLeaseLost)
	}
	return db.WithTx(ctx, func(tx *Tx) error {
		res, err := tx.execContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("%s event %s: %w", what, id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		if err := eventExists(ctx, tx, id); err != nil {
			return err
		}
		return fmt.Errorf("%s event %s: %w", what, id, ErrLeaseLost)
	})
}

// eventExists is nil when the event exists, a not-found error otherwise.
func eventExists(ctx context.Context, tx *Tx, id string) error {
	var one int
	err := tx.queryRowContext(ctx, "SELECT 1 FROM events WHERE id = ?", id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return model.Errorf(model.ENotFound, "event %s not found", clip.Quote(id))
	}
	if err != nil {
		return fmt.Errorf("read event %s: %w", id, err)
	}
	return nil
}

// RedeliverEvent makes a dead event pending again, due now, attempts 0. It keeps its
// place in commit order: it is its instance's oldest pending event for its rule again,
// delivered before that instance's newer pending events, and after the ones delivered
// while it was dead (out of order).
func (db *DB) RedeliverEvent(ctx context.Context, id string) error {
	return db.WithTx(ctx, func(tx *Tx) error {
		res, err := tx.execContext(ctx, `UPDATE events SET status = 'pending', attempts = 0, next_at = ?,
			finished_at = '', lease_owner = '', lease_until = 0 WHERE id = ? AND status = 'dead'`, db.Now().UnixMilli(), id)
		if err != nil {
			return fmt.Errorf("redeliver event %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		if err := eventExists(ctx, tx, id); err != nil {
			return err
		}
		return model.Errorf(model.EConflict, "event %s is not dead: only a dead event is redelivered", clip.Quote(id))
	})
}

// The bounds of a list of events.
const (
	defaultEventList = 100
	maxEventList     = 1000
)

// ListEvents lists events by status ("" = all) and rule ("" = all), newest first,
// without their bodies (Event reads one); limit is bounded (100 when not positive,
// 1000 at most).
func (db *DB) ListEvents(ctx context.Context, status, rule string, limit int) ([]*Event, error) {
	switch status {
	case "", EventPending, EventDelivered, EventDead:
	default:
		return nil, model.Errorf(model.EInvalid, "unknown event status %s (pending, delivered or dead)", clip.Quote(status))
	}
	if limit <= 0 {
		limit = defaultEventList
	}
	limit = min(limit, maxEventList)
	q, args := "SELECT "+eventListCols+" FROM events", []any{}
	var where []string
	if status != "" {
		where, args = append(where, "status = ?"), append(args, status)
	}
	if rule != "" {
		where, args = append(where, "rule = ?"), append(args, rule)
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := db.reader().queryContext(ctx, q+" ORDER BY seq DESC LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []*Event
	for rows.Next() {
		e, err := scanEvent(rows, false)
		if err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Event reads one event with its body.
func (db *DB) Event(ctx context.Context, id string) (*Event, error) {
	e, err := scanEvent(db.reader().queryRowContext(ctx, "SELECT "+eventCols+" FROM events WHERE id = ?", id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.Errorf(model.ENotFound, "event %s not found", clip.Quote(id))
	}
	if err != nil {
		return nil, fmt.Errorf("read event %s: %w", id, err)
	}
	return e, nil
}

// EventKeynameShown returns the one rule of every list of events (the API, the
// console) for whether auth sees an event's keyname: only when it may read the
// event's schema (a schema since deleted: never), as it would see the instance
// itself. The answer per schema is kept for the returned function's life (one list).
func (db *DB) EventKeynameShown(ctx context.Context, auth *model.Auth) func(ev *Event) bool {
	readable := map[string]bool{}
	return func(ev *Event) bool {
		ok, seen := readable[ev.Classname]
		if !seen {
			s, err := db.Schema(ctx, ev.Classname)
			ok = err == nil && model.CanRead(auth, s)
			readable[ev.Classname] = ok
		}
		return ok
	}
}

// EventCounts counts pending and dead events (dashboard, metrics).
func (db *DB) EventCounts(ctx context.Context) (pending, dead int, err error) {
	rows, err := db.reader().queryContext(ctx, `SELECT status, count(*) FROM events
		WHERE status IN ('pending', 'dead') GROUP BY status`)
	if err != nil {
		return 0, 0, fmt.Errorf("count events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return 0, 0, fmt.Errorf("count events: %w", err)
		}
		if status == EventPending {
			pending = n
		} else {
			dead = n
		}
	}
	return pending, dead, rows.Err()
}

// PurgeEvents deletes delivered events finished before t. Pending and dead events
// stay. The highest seq given out is kept in the registry first (RegEventsSeq), so
// seq keeps growing, never given twice, whatever is purged.
func (db *DB) PurgeEvents(ctx context.Context, before time.Time) (int64, error) {
	// Checked on the read pool first: a purge with nothing to delete (the usual start)
	// takes no writer and commits nothing.
	cutoff := before.UTC().Format(time.RFC3339)
	var any bool
	if err := db.reader().queryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM events WHERE status = 'delivered' AND finished_at < ?)",
		cutoff).Scan(&any); err != nil {
		return 0, fmt.Errorf("purge events: %w", err)
	}
	if !any {
		return 0, nil
	}
	var n int64
	err := db.WithTx(ctx, func(tx *Tx) error {
		var high sql.NullInt64
		if err := tx.queryRowContext(ctx, "SELECT max(seq) FROM events").Scan(&high); err != nil {
			return fmt.Errorf("purge events: %w", err)
		}
		if high.Valid {
			if err := tx.SetRegistry(ctx, RegEventsSeq, strconv.FormatInt(high.Int64, 10)); err != nil {
				return fmt.Errorf("purge events: %w", err)
			}
		}
		res, err := tx.execContext(ctx, "DELETE FROM events WHERE status = 'delivered' AND finished_at < ?", cutoff)
		if err != nil {
			return fmt.Errorf("purge events: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}
