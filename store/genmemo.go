package store

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// A request reads the schema generation counter (which keys the schema and
// configuration caches) once, not at every cached read it makes: RequestScope puts a
// memo in its context. The memo is the counter as one statement of the request read
// it; it is read again once any write transaction of this process has committed since
// (the request's own writes included) or after memoLife, so a request sees other
// processes' changes as of its start, as a request that arrived a moment earlier would.
type genMemo struct {
	mu      sync.Mutex
	set     bool
	gen     int64
	commits uint64
	at      time.Time
}

type genMemoKey struct{}

// memoLife bounds how long a memo is trusted (a context kept past its request).
const memoLife = time.Second

// RequestScope returns ctx with a memo of the schema generation counter for the
// reads of one request (see genMemo).
func (db *DB) RequestScope(ctx context.Context) context.Context {
	return context.WithValue(ctx, genMemoKey{}, &genMemo{})
}

// memoOf returns ctx's memo (nil outside a request scope) and its counter, with
// whether that is fresh.
func (db *DB) memoOf(ctx context.Context) (m *genMemo, gen int64, fresh bool) {
	m, _ = ctx.Value(genMemoKey{}).(*genMemo)
	if m == nil {
		return nil, 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m, m.gen, m.set && m.commits == db.commits.Load() && time.Since(m.at) <= memoLife
}

// remember stores gen, read after commits had been counted, in m.
func (m *genMemo) remember(gen int64, commits uint64) {
	m.mu.Lock()
	m.set, m.gen, m.commits, m.at = true, gen, commits, time.Now()
	m.mu.Unlock()
}

// instanceAndGeneration reads one instance and the generation counter in one
// statement (one snapshot), for the first instance read of a request scope.
func (db *DB) instanceAndGeneration(ctx context.Context, m *genMemo, cls, key string) (*Instance, error) {
	commits := db.commits.Load()
	var gen int64
	var id sql.NullInt64
	var c, k, disp, raw, created, updated sql.NullString
	var enabled sql.NullBool
	err := db.rqueryRow(ctx, "SELECT g.generation, i.id, i.classname, i.keyname, i.displayname, i.is_enabled, i.data, "+
		"i.created_at, i.updated_at FROM schema_generation g LEFT JOIN instances i ON i.classname = ? AND i.keyname = ?",
		cls, key).Scan(&gen, &id, &c, &k, &disp, &enabled, &raw, &created, &updated)
	if err != nil {
		return nil, notFoundInstance(cls, key, err)
	}
	m.remember(gen, commits)
	if !id.Valid {
		return nil, notFoundInstance(cls, key, sql.ErrNoRows)
	}
	data, err := decodeData(raw.String)
	if err != nil {
		return nil, notFoundInstance(cls, key, err)
	}
	return &Instance{ID: id.Int64, Classname: c.String, Keyname: k.String, Displayname: disp.String,
		IsEnabled: enabled.Bool, Data: data, CreatedAt: created.String, UpdatedAt: updated.String, raw: raw.String}, nil
}
