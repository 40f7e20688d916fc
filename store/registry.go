package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"dataservice/store/model"
)

// Registry keys used by the start-up sequence.
const (
	RegDBVersion       = "DB_VERSION"
	RegDBVersionDate   = "DB_VERSION_DATE"
	RegLastStart       = "LAST_START"
	RegLastStartFailed = "LAST_START_FAILED"
	RegInstanceUUID    = "INSTANCE_UUID"
	// RegEventsSeq is the highest seq of the events a purge deleted (events.go): the
	// next event's seq is above it and above every event's left.
	RegEventsSeq = "EVENTS_SEQ"
)

// Registry returns the value of key, or a not-found error.
func (db *DB) Registry(ctx context.Context, key string) (string, error) {
	return registryGet(ctx, db.writer(), key)
}

// Registry returns the value of key inside the transaction.
func (tx *Tx) Registry(ctx context.Context, key string) (string, error) {
	return registryGet(ctx, tx, key)
}

func registryGet(ctx context.Context, q querier, key string) (string, error) {
	var v string
	err := q.queryRowContext(ctx, "SELECT value FROM registry WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", model.Errorf(model.ENotFound, "registry key %s not found", key)
	}
	if err != nil {
		return "", fmt.Errorf("read registry %s: %w", key, err)
	}
	return v, nil
}

// SetRegistry writes key inside the transaction.
func (tx *Tx) SetRegistry(ctx context.Context, key, value string) error {
	_, err := tx.execContext(ctx, `INSERT INTO registry(key, value) VALUES(?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return fmt.Errorf("write registry %s: %w", key, err)
	}
	return nil
}

// SetRegistry writes key in its own transaction.
func (db *DB) SetRegistry(ctx context.Context, key, value string) error {
	return db.WithTx(ctx, func(tx *Tx) error { return tx.SetRegistry(ctx, key, value) })
}
