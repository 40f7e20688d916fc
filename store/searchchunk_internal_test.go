package store

import (
	"testing"
	"time"
)

// TestNextChunk: a catch-up chunk's size follows the rows' cost, so a batch of large
// rows stays within its time bound: the next chunk is as many rows as fit in what is
// left at the last chunk's time per row, never fewer than 1 nor more than
// catchUpChunkRows.
func TestNextChunk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		took       time.Duration
		k          int
		left, want int
	}{
		{took: 8 * time.Millisecond, k: 8, left: 240, want: 240},  // 1 ms a row: 240 fit
		{took: 640 * time.Millisecond, k: 8, left: 200, want: 2},  // 80 ms a row (100 KB rows)
		{took: 400 * time.Millisecond, k: 8, left: 10, want: 1},   // not even one fits: one
		{took: 80 * time.Microsecond, k: 8, left: 240, want: 500}, // small rows: the whole chunk
		{took: 0, k: 8, left: 240, want: 500},                     // too fast to measure
		{took: time.Millisecond, k: 0, left: 240, want: 1},        // nothing indexed
		{took: time.Millisecond, k: 8, left: -5, want: 1},         // the bound is spent
	} {
		if got := nextChunk(c.took, c.k, time.Duration(c.left)*time.Millisecond); got != c.want {
			t.Errorf("nextChunk(%v, %d, %d ms) = %d, want %d", c.took, c.k, c.left, got, c.want)
		}
	}
}
