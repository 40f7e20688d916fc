package server_test

import (
	"fmt"
	"strings"
	"testing"

	"dataservice/store"
)

// TestRawfileCellsBounded: a CSV of more than store.CSVMaxCells cells (rows × columns)
// is a 413 naming the bound, and nothing is written: a cell costs one delimiter in the
// body but a field in memory.
func TestRawfileCellsBounded(t *testing.T) {
	e := newLoadEnv(t, envOptions{NoRunner: true})
	cols := 2001
	var sb strings.Builder
	sb.WriteString("keyname")
	for i := 1; i < cols; i++ {
		fmt.Fprintf(&sb, ";c%d", i)
	}
	sb.WriteString("\n")
	for i := 0; i < store.CSVMaxCells/cols+1; i++ {
		fmt.Fprintf(&sb, "wide%d%s\n", i, strings.Repeat(";", cols-1))
	}
	wantError(t, e.post("/api/rawfile/?schema=server&delimiter=%3B", e.rawfile, []byte(sb.String())), 413,
		fmt.Sprintf("more than %d cells (rows × columns) in one request; split the file", store.CSVMaxCells))
	if got := e.queryString("SELECT count(*) FROM instances WHERE keyname LIKE 'wide%'"); got != "0" {
		t.Fatalf("instances written by a refused load: %s", got)
	}
}
