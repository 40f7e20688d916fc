package testkit

import (
	"bytes"
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
	Exec(tb, db, "UPDATE instances SET data = ? WHERE classname = ? AND keyname = ?", string(b), class, key)
}
