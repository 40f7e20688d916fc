package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"dataservice/store/model"
)

// Session is a web console sign-in. The token itself is never stored, only its hash.
type Session struct {
	ID        int64
	UserID    int64
	Login     string
	CSRF      string
	Address   string
	CreatedAt time.Time
	LastSeen  time.Time
	ExpiresAt time.Time
}

// SessionLimits are the idle and absolute lifetimes of console sessions.
type SessionLimits struct {
	Idle, Absolute time.Duration
}

// ConsoleSessionLimits reads the session lifetimes from the configuration.
func (db *DB) ConsoleSessionLimits(ctx context.Context) SessionLimits {
	return SessionLimits{
		Idle:     time.Duration(db.ConfigInt(ctx, ConfigSessionIdleMinutes)) * time.Minute,
		Absolute: time.Duration(db.ConfigInt(ctx, ConfigSessionMaxHours)) * time.Hour,
	}
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// CreateSession starts a session for the user and returns its token (for the cookie).
func (db *DB) CreateSession(ctx context.Context, userID int64, login, address string, lim SessionLimits) (string, *Session, error) {
	token := randomToken()
	now := db.Now().UTC()
	s := &Session{UserID: userID, Login: login, CSRF: randomToken(), Address: address, CreatedAt: now,
		LastSeen: now, ExpiresAt: now.Add(lim.Absolute)}
	var id int64
	err := db.withWriter(ctx, func(c conn) (err error) {
		id, _, err = db.dia.insertID(ctx, c, `INSERT INTO sessions(token_hash, user_id, login, csrf, address, created_at,
		last_seen, expires_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?)`, tokenHash(token), userID, login, s.CSRF, address,
			now.Unix(), now.Unix(), s.ExpiresAt.Unix())
		return err
	})
	if err != nil {
		return "", nil, fmt.Errorf("create session: %w", err)
	}
	s.ID = id
	// Expired sessions of everyone go with each new sign-in, so the table stays small.
	if _, err := db.execWriter(ctx, "DELETE FROM sessions WHERE expires_at <= ? OR last_seen <= ?",
		now.Unix(), now.Add(-lim.Idle).Unix()); err != nil {
		return "", nil, fmt.Errorf("purge sessions: %w", err)
	}
	return token, s, nil
}

// Session returns the live session of token and records the request's time (at most
// once a minute). A missing, expired or idle session is model.ENotFound; expired and idle
// ones are deleted.
func (db *DB) Session(ctx context.Context, token string, lim SessionLimits) (*Session, error) {
	if token == "" || len(token) > 128 {
		return nil, model.Errorf(model.ENotFound, "no session")
	}
	s := &Session{}
	var created, seen, exp int64
	err := db.rqueryRow(ctx, `SELECT id, user_id, login, csrf, address, created_at, last_seen, expires_at
		FROM sessions WHERE token_hash = ?`, tokenHash(token)).
		Scan(&s.ID, &s.UserID, &s.Login, &s.CSRF, &s.Address, &created, &seen, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.Errorf(model.ENotFound, "no session")
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	s.CreatedAt, s.LastSeen, s.ExpiresAt = time.Unix(created, 0).UTC(), time.Unix(seen, 0).UTC(), time.Unix(exp, 0).UTC()
	return db.liveSession(ctx, s, lim)
}

// SessionUser is Session with the console's limits (ConsoleSessionLimits) and the
// session's user, read in the same statement (nil when its row is gone), with, in a
// request scope, the schema generation (RequestScope) and the instance the page will
// show (Prefetch): a console page's first statement reads all of them.
func (db *DB) SessionUser(ctx context.Context, token string) (*Session, *Instance, error) {
	if token == "" || len(token) > 128 {
		return nil, nil, model.Errorf(model.ENotFound, "no session")
	}
	m, _, _ := db.memoOf(ctx)
	want := m.takeWant("", "")
	commits := db.commits.Load()
	s := &Session{}
	var gen, created, seen, exp int64
	var u, t nullInstance
	query, args := sessionUserQuery, []any{tokenHash(token)}
	dest := append([]any{&gen, &s.ID, &s.UserID, &s.Login, &s.CSRF, &s.Address, &created, &seen, &exp}, u.dest()...)
	if want != nil {
		query, args, dest = sessionUserWantQuery, append(args, want[0], want[1]), append(dest, t.dest()...)
	}
	err := db.rqueryRow(ctx, query, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, model.Errorf(model.ENotFound, "no session")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read session: %w", err)
	}
	if m != nil {
		m.remember(gen, commits)
		m.keep(want, &t, commits)
	}
	s.CreatedAt, s.LastSeen, s.ExpiresAt = time.Unix(created, 0).UTC(), time.Unix(seen, 0).UTC(), time.Unix(exp, 0).UTC()
	if s, err = db.liveSession(ctx, s, db.ConsoleSessionLimits(ctx)); err != nil {
		return nil, nil, err
	}
	user, err := u.instance()
	if err != nil {
		return nil, nil, fmt.Errorf("read user of session: %w", err)
	}
	return s, user, nil
}

// sessionUserQuery reads a session, its user and the schema generation;
// sessionUserWantQuery also the instance the request wants (Prefetch).
const (
	sessionUserQuery = `SELECT g.generation, s.id, s.user_id, s.login, s.csrf, s.address, s.created_at, s.last_seen,
		s.expires_at, ` + genInstanceCols + ` FROM schema_generation g JOIN sessions s ON s.token_hash = ?
		LEFT JOIN instances i ON i.classname = '_user' AND i.id = s.user_id`
	sessionUserWantQuery = `SELECT g.generation, s.id, s.user_id, s.login, s.csrf, s.address, s.created_at, s.last_seen,
		s.expires_at, ` + genInstanceCols + `, ` + genPrefetchCols + ` FROM schema_generation g JOIN sessions s ON s.token_hash = ?
		LEFT JOIN instances i ON i.classname = '_user' AND i.id = s.user_id
		LEFT JOIN instances t ON t.classname = ? AND t.keyname = ?`
)

// liveSession checks s against lim: a session past its limits is deleted and
// model.ENotFound; a live one has its last request's time recorded (at most once a
// minute).
func (db *DB) liveSession(ctx context.Context, s *Session, lim SessionLimits) (*Session, error) {
	now := db.Now().UTC()
	// The absolute limit is the stored expiry or the configured one, whichever is sooner,
	// so lowering the configuration shortens sessions already open.
	if !now.Before(s.ExpiresAt) || !now.Before(s.CreatedAt.Add(lim.Absolute)) || !now.Before(s.LastSeen.Add(lim.Idle)) {
		if err := db.DeleteSession(ctx, s.ID); err != nil {
			return nil, err
		}
		return nil, model.Errorf(model.ENotFound, "session expired")
	}
	if now.Sub(s.LastSeen) >= time.Minute {
		if _, err := db.execWriter(ctx, "UPDATE sessions SET last_seen = ? WHERE id = ?", now.Unix(), s.ID); err != nil {
			return nil, fmt.Errorf("touch session: %w", err)
		}
		s.LastSeen = now
	}
	return s, nil
}

// DeleteSession ends one session.
func (db *DB) DeleteSession(ctx context.Context, id int64) error {
	if _, err := db.execWriter(ctx, "DELETE FROM sessions WHERE id = ?", id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteUserSessions ends every session of a user.
func (db *DB) DeleteUserSessions(ctx context.Context, userID int64) error {
	if _, err := db.execWriter(ctx, "DELETE FROM sessions WHERE user_id = ?", userID); err != nil {
		return fmt.Errorf("delete sessions: %w", err)
	}
	return nil
}
