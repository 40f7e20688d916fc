package store

import (
	"cmp"
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"dataservice/store/model"
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
	// want is an instance the request will read (Prefetch); pre holds it once read.
	want *[2]string
	pre  *prefetched
}

// prefetched is an instance read ahead of its use (nil in: there was none), with the
// commit count read before it and when it was read.
type prefetched struct {
	cls, key string
	in       *Instance
	commits  uint64
	at       time.Time
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

// Prefetch notes in ctx's request scope that the request will read instance key of
// cls once it has checked its caller: the scope's first instance read (the caller's
// credentials) reads it in the same statement, and Instance takes it from there while
// no write transaction of this process has committed since (memoLife at most). The
// answer is the one a read at the request's start gives, as with the generation memo;
// the caller still decides what the caller may see of it.
func (db *DB) Prefetch(ctx context.Context, cls, key string) {
	// A name no instance can have (a NUL, bytes that are not UTF-8, which PostgreSQL
	// refuses as a parameter) is not read ahead: the first read must not fail for it.
	if !utf8.ValidString(cls) || !utf8.ValidString(key) || strings.ContainsRune(cls, 0) || strings.ContainsRune(key, 0) {
		return
	}
	if m, _ := ctx.Value(genMemoKey{}).(*genMemo); m != nil {
		m.mu.Lock()
		m.want = &[2]string{cls, key}
		m.mu.Unlock()
	}
}

// takeWant returns the instance the scope wants read ahead (Prefetch), nil when none
// or when it is cls/key (the read being made); either way it is asked once.
func (m *genMemo) takeWant(cls, key string) *[2]string {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	want := m.want
	m.want = nil
	m.mu.Unlock()
	if want != nil && want[0] == cls && want[1] == key {
		return nil
	}
	return want
}

// keep holds t, the row read for want after commits had been counted, for Instance.
func (m *genMemo) keep(want *[2]string, t *nullInstance, commits uint64) {
	if m == nil || want == nil {
		return
	}
	if pre, err := t.instance(); err == nil {
		m.mu.Lock()
		m.pre = &prefetched{cls: want[0], key: want[1], in: pre, commits: commits, at: time.Now()}
		m.mu.Unlock()
	}
}

// prefetchedInstance is Instance from ctx's prefetched row, if it holds cls/key and is
// still current; the row is used once.
func (db *DB) prefetchedInstance(ctx context.Context, cls, key string) (*Instance, bool, error) {
	m, _ := ctx.Value(genMemoKey{}).(*genMemo)
	if m == nil {
		return nil, false, nil
	}
	m.mu.Lock()
	p := m.pre
	if p == nil || p.cls != cls || p.key != key {
		m.mu.Unlock()
		return nil, false, nil
	}
	m.pre = nil
	m.mu.Unlock()
	if p.commits != db.commits.Load() || time.Since(p.at) > memoLife {
		return nil, false, nil
	}
	if p.in == nil {
		return nil, true, notFoundInstance(cls, key, sql.ErrNoRows)
	}
	return p.in, true, nil
}

// The instance columns read by instanceAndGeneration, for i and for the prefetched t.
const (
	genInstanceCols = "i.id, i.classname, i.keyname, i.displayname, i.is_enabled, i.data, i.created_at, i.updated_at"
	genPrefetchCols = "t.id, t.classname, t.keyname, t.displayname, t.is_enabled, t.data, t.created_at, t.updated_at"
)

// nullInstance receives an instance's columns from a LEFT JOIN.
type nullInstance struct {
	id                                    sql.NullInt64
	cls, key, disp, raw, created, updated sql.NullString
	enabled                               sql.NullBool
}

func (n *nullInstance) dest() []any {
	return []any{&n.id, &n.cls, &n.key, &n.disp, &n.enabled, &n.raw, &n.created, &n.updated}
}

// instance is the row read, nil when there was none.
func (n *nullInstance) instance() (*Instance, error) {
	if !n.id.Valid {
		return nil, nil
	}
	data, err := model.DecodeData(n.raw.String)
	if err != nil {
		return nil, err
	}
	return &Instance{ID: n.id.Int64, Classname: n.cls.String, Keyname: n.key.String, Displayname: n.disp.String,
		IsEnabled: n.enabled.Bool, Data: data, CreatedAt: n.created.String, UpdatedAt: n.updated.String,
		raw: n.raw.String}, nil
}

// instanceAndGeneration reads one instance and the generation counter in one
// statement (one snapshot), for the first instance read of a request scope, together
// with the instance the scope will read (Prefetch), if any.
func (db *DB) instanceAndGeneration(ctx context.Context, m *genMemo, cls, key string) (*Instance, error) {
	want := m.takeWant(cls, key)
	commits := db.commits.Load()
	var gen int64
	var i, t nullInstance
	var err error
	if want == nil {
		err = db.rqueryRow(ctx, "SELECT g.generation, "+genInstanceCols+
			" FROM schema_generation g LEFT JOIN instances i ON i.classname = ? AND i.keyname = ?",
			cls, key).Scan(append([]any{&gen}, i.dest()...)...)
	} else {
		err = db.rqueryRow(ctx, "SELECT g.generation, "+genInstanceCols+", "+genPrefetchCols+
			" FROM schema_generation g LEFT JOIN instances i ON i.classname = ? AND i.keyname = ?"+
			" LEFT JOIN instances t ON t.classname = ? AND t.keyname = ?",
			cls, key, want[0], want[1]).Scan(append(append([]any{&gen}, i.dest()...), t.dest()...)...)
	}
	if err != nil {
		return nil, notFoundInstance(cls, key, err)
	}
	m.remember(gen, commits)
	m.keep(want, &t, commits)
	in, err := i.instance()
	if err != nil || in == nil {
		return nil, notFoundInstance(cls, key, cmp.Or(err, sql.ErrNoRows))
	}
	return in, nil
}
