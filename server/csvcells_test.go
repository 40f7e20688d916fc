package server_test

import (
	"fmt"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store/codec"
)

// TestRawfileCellsBounded: a CSV of more than codec.CSVMaxCells cells (rows × columns)
// is a 413 naming the bound, and nothing is written: a cell costs one delimiter in the
// body but a field in memory.
func TestRawfileCellsBounded(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	wantError(t, e.post("/api/rawfile/?schema=server&delimiter=%3B", e.rawfile, []byte(testkit.WideCSV())), 413,
		fmt.Sprintf("more than %d cells (rows × columns) in one request; split the file", codec.CSVMaxCells))
	if got := e.queryString("SELECT count(*) FROM instances WHERE keyname LIKE 'wide%'"); got != "0" {
		t.Fatalf("instances written by a refused load: %s", got)
	}
}
