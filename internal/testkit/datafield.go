package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"dataservice/store"
)

// SetDataField sets one field of an instance's stored data behind the store's back
// (a state loads refuse or would rewrite), on either engine: the data is read,
// changed in Go and written back whole, where SQLite's json_set has no PostgreSQL
// twin for the json type. value is any JSON-encodable value; numbers in the rest of
// the data keep their text.
func SetDataField(tb testing.TB, db *store.DB, class, key, field string, value any) {
	tb.Helper()
	text := QueryString(tb, db, "SELECT CAST(data AS TEXT) FROM instances WHERE classname = ? AND keyname = ?", class, key)
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var data map[string]any
	if err := dec.Decode(&data); err != nil {
		tb.Fatalf("data of %s/%s: %v", class, key, err)
	}
	data[field] = value
	b, err := json.Marshal(data)
	if err != nil {
		tb.Fatalf("data of %s/%s: %v", class, key, err)
	}
	// As SQL outside the store must: an UPDATE lists its row for SQLite's search index
	// itself (docs/operations.md, "The search index"), in the same transaction.
	ctx := context.Background()
	err = Migrator(tb, db).Migrate(ctx, func(m *store.Migration) error {
		if err := m.Exec(ctx, "UPDATE instances SET data = ? WHERE classname = ? AND keyname = ?", string(b), class, key); err != nil {
			return err
		}
		if Postgres() {
			return nil // the engine maintains its index in every write
		}
		return m.Exec(ctx, `INSERT INTO instances_search_dirty(id) SELECT id FROM instances WHERE classname = ? AND keyname = ?
			ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`, class, key)
	})
	if err != nil {
		tb.Fatalf("set %s of %s/%s: %v", field, class, key, err)
	}
}
