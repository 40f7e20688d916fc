package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Node is one serving process (a node) as the nodes table records it. Several nodes
// share one PostgreSQL database; on SQLite there is normally one. A node writes its
// row when it starts, renews LastSeen while it runs (its heartbeat) and removes the
// row when it stops cleanly; a killed node's row stays until it is forgotten.
type Node struct {
	// ID is random per process (NewNodeID).
	ID      string
	Host    string
	Version string
	// Settings maps each setting that must be the same on every node to a salted
	// hash of its value (model.SaltedHash under NodeSalt), never the value.
	Settings  map[string]string
	StartedAt time.Time
	LastSeen  time.Time
}

// nodeForget is how long the row of a node that stopped renewing it (a killed
// process) is kept: long enough to tell what ran recently, short enough that the
// table stays small.
const nodeForget = 24 * time.Hour

// NewNodeID is a new random node id: 16 hex digits.
func NewNodeID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on supported systems
	}
	return hex.EncodeToString(b)
}

// NodeSalt is the database's salt of the nodes' settings hashes, made at first use:
// every node hashes its settings under it, so equal settings give equal hashes.
func (db *DB) NodeSalt(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, 16)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("node salt: %w", err)
	}
	var text string
	err := db.withWriter(ctx, func(c conn) error {
		if _, err := c.execContext(ctx, "INSERT INTO node_salt(id, salt) VALUES(1, ?) ON CONFLICT(id) DO NOTHING",
			base64.RawStdEncoding.EncodeToString(fresh)); err != nil {
			return err
		}
		return c.queryRowContext(ctx, "SELECT salt FROM node_salt WHERE id = 1").Scan(&text)
	})
	if err != nil {
		return nil, fmt.Errorf("node salt: %w", err)
	}
	salt, err := base64.RawStdEncoding.DecodeString(text)
	if err != nil || len(salt) < 16 {
		return nil, fmt.Errorf("node salt: the stored salt is not 16 bytes of base64")
	}
	return salt, nil
}

// JoinNodes records n as a running node (started and last seen at n.StartedAt), in
// one write transaction with check: check is given the other nodes seen since
// liveSince, and n is recorded only when it returns nil (its error is returned as
// is). Write transactions are serialized across nodes, so of two nodes starting at
// once the second sees the first. Rows of nodes not seen for a day are dropped.
// check may be nil (a node recording itself again after its row went missing).
func (db *DB) JoinNodes(ctx context.Context, n *Node, liveSince time.Time, check func(live []Node) error) error {
	settings, err := json.Marshal(n.Settings)
	if err != nil {
		return fmt.Errorf("join nodes: %w", err)
	}
	raw, release, err := db.beginWriter(ctx)
	if err != nil {
		return fmt.Errorf("join nodes: %w", err)
	}
	defer release()
	defer raw.Rollback()
	tx := conn{raw, db.dia}
	if _, err := tx.execContext(ctx, "DELETE FROM nodes WHERE last_seen < ?",
		n.StartedAt.Add(-nodeForget).UnixMilli()); err != nil {
		return fmt.Errorf("join nodes: %w", err)
	}
	if check != nil {
		live, err := readNodes(ctx, tx, "WHERE last_seen >= ? AND id <> ?", liveSince.UnixMilli(), n.ID)
		if err != nil {
			return err
		}
		if err := check(live); err != nil {
			return err
		}
	}
	ms := n.StartedAt.UnixMilli()
	if _, err := tx.execContext(ctx, `INSERT INTO nodes(id, host, version, settings, started_at, last_seen)
		VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET last_seen = excluded.last_seen`,
		n.ID, n.Host, n.Version, string(settings), ms, ms); err != nil {
		return fmt.Errorf("join nodes: %w", err)
	}
	if err := raw.Commit(); err != nil {
		return fmt.Errorf("join nodes: %w", err)
	}
	db.committed()
	return nil
}

// TouchNode renews node id's last_seen (its heartbeat); false when its row is gone.
// Where the engine allows it, the update runs on the heartbeat's own connection
// without the writer lock (DB.hb): JoinNodes, which reads the live nodes under that
// lock, sees every heartbeat committed before it, and a heartbeat racing it changes
// only a row it does not write.
func (db *DB) TouchNode(ctx context.Context, id string, now time.Time) (bool, error) {
	res, err := db.execHeartbeat(ctx, "UPDATE nodes SET last_seen = ? WHERE id = ?", now.UnixMilli(), id)
	if err != nil {
		return false, fmt.Errorf("node heartbeat: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("node heartbeat: %w", err)
	}
	return n > 0, nil
}

// LeaveNodes removes node id's row: the node stops cleanly.
func (db *DB) LeaveNodes(ctx context.Context, id string) error {
	if _, err := db.execHeartbeat(ctx, "DELETE FROM nodes WHERE id = ?", id); err != nil {
		return fmt.Errorf("leave nodes: %w", err)
	}
	return nil
}

// execHeartbeat runs a statement on the node's own row: on the heartbeat's
// connection where there is one (DB.hb), a transaction of its own taking no writer
// lock; on the writer otherwise.
func (db *DB) execHeartbeat(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if db.hb == nil {
		return db.execWriter(ctx, query, args...)
	}
	return conn{db.hb, db.dia}.execContext(ctx, query, args...)
}

// Nodes lists the recorded nodes, live or not, oldest start first.
func (db *DB) Nodes(ctx context.Context) ([]Node, error) {
	return readNodes(ctx, db.reader(), "")
}

// readNodes reads the nodes rows that where (a WHERE clause, or "") selects.
func readNodes(ctx context.Context, q querier, where string, args ...any) ([]Node, error) {
	rows, err := q.queryContext(ctx, "SELECT id, host, version, settings, started_at, last_seen FROM nodes "+
		where+" ORDER BY started_at, id", args...)
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		var settings string
		var started, seen int64
		if err := rows.Scan(&n.ID, &n.Host, &n.Version, &settings, &started, &seen); err != nil {
			return nil, fmt.Errorf("read nodes: %w", err)
		}
		if err := json.Unmarshal([]byte(settings), &n.Settings); err != nil {
			return nil, fmt.Errorf("read nodes: node %s: settings: %w", n.ID, err)
		}
		n.StartedAt, n.LastSeen = time.UnixMilli(started), time.UnixMilli(seen)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	return out, nil
}
