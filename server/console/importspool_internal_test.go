package console

import (
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"dataservice/store"
)

// TestImportSpoolExpiresAndBounds: a kept file is gone (and its file removed) once its
// time has passed; the bytes kept for all sessions are bounded.
func TestImportSpoolExpiresAndBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newImportSpool(100, slog.New(slog.DiscardHandler))
	s.now = func() time.Time { return now }
	a := &store.Session{ID: 1, CSRF: "csrf-a"}
	tok := s.keep(a, "a.yml", []byte("- {}\n"))
	if tok == "" {
		t.Fatal("nothing kept")
	}
	kept := s.files[tok].file
	t.Cleanup(func() {
		for tok := range s.files {
			s.remove(tok)
		}
	})
	// The upload is no file of the directory: it lives only while the process holds it.
	if _, err := os.Stat(kept.Name()); !os.IsNotExist(err) {
		t.Fatalf("the kept file has a name on disk: %v", err)
	}
	now = now.Add(spoolTTL - time.Second)
	if _, body, err := s.open(a, tok, 100); err != nil || string(body) != "- {}\n" {
		t.Fatalf("before its time: %q, %v", body, err)
	}
	// The same id with another CSRF token is another session.
	if _, _, err := s.open(&store.Session{ID: 1, CSRF: "csrf-b"}, tok, 100); err != errSpoolForeign {
		t.Fatalf("another session with the same id: %v", err)
	}
	now = now.Add(2 * time.Second)
	if _, _, err := s.open(a, tok, 100); err != errSpoolGone {
		t.Fatalf("after its time: %v", err)
	}
	if _, err := kept.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the expired file is still held: %v", err)
	}
	// 4 bodies of 100 bytes at most, for everyone together.
	big := []byte(strings.Repeat("x", 100))
	for i := range 4 {
		if s.keep(&store.Session{ID: int64(10 + i), CSRF: "c"}, "f", big) == "" {
			t.Fatalf("file %d of 4 not kept", i+1)
		}
	}
	if s.keep(&store.Session{ID: 20, CSRF: "c"}, "f", big) != "" || s.total != 400 {
		t.Fatalf("a fifth body was kept past the bound: %d bytes kept", s.total)
	}
	// And at most spoolMaxFiles files, however small, for everyone together.
	for tok := range s.files {
		s.remove(tok)
	}
	for i := range spoolMaxFiles {
		if s.keep(&store.Session{ID: int64(100 + i), CSRF: "c"}, "f", []byte("x")) == "" {
			t.Fatalf("file %d of %d not kept", i+1, spoolMaxFiles)
		}
	}
	if s.keep(&store.Session{ID: 1000, CSRF: "c"}, "f", []byte("x")) != "" || len(s.files) != spoolMaxFiles {
		t.Fatalf("a file past the count bound was kept: %d files", len(s.files))
	}
}

// TestErrorLine: the line a YAML error names, counted from 1 whether the library's
// scanner (which counts from 1) or its parser (from 0) found it.
func TestErrorLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		doc  string
		line int
	}{
		{"- {a: 1}\n- {b: 2\n- {c: 3}\n", 2},         // parser: a flow mapping not closed
		{"- a: 1\n  b: 2\n c: 3\n", 3},               // parser: did not find expected key
		{"- a: 1\n- b: c: d\n", 2},                   // scanner: mapping values not allowed
		{"- a: 1\n- b: 2\n- c: \"x\n", 3},            // scanner: unclosed quoted scalar
		{"- a: 1\n\t- b: 2\n", 2},                    // scanner: a tab
		{"- a\n- b\n- c\n- d: [1, 2\n- e\n- f\n", 4}, // parser: a flow sequence not closed
	} {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(c.doc), &n)
		if err == nil {
			t.Fatalf("%q parsed", c.doc)
		}
		if got := errorLine("doc: invalid YAML/JSON: " + err.Error()); got != c.line {
			t.Fatalf("%q: %v: line %d, want %d", c.doc, err, got, c.line)
		}
	}
}

// TestImportSpoolConcurrent: Checks, Imports and sign-outs of several sessions at once
// (run it with -race): a kept file is read whole or reported gone, never half, and the
// spool's byte count ends at what it holds.
func TestImportSpoolConcurrent(t *testing.T) {
	t.Parallel()
	s := newImportSpool(1<<10, slog.New(slog.DiscardHandler))
	body := []byte(strings.Repeat("- {classname: site, keyname: s}\n", 20))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := &store.Session{ID: int64(i % 4), CSRF: "c" + strconv.Itoa(i%4)}
			for j := range 50 {
				tok := s.keep(sess, "f.yml", body)
				if tok == "" {
					continue // full for now
				}
				_, got, err := s.open(sess, tok, 1<<10)
				if err != nil && err != errSpoolGone {
					t.Errorf("open: %v", err)
					return
				}
				if err == nil && string(got) != string(body) {
					t.Errorf("read %d bytes of %d", len(got), len(body))
					return
				}
				switch j % 3 {
				case 0:
					s.drop(sess, tok)
				case 1:
					s.dropSession(sess)
				}
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	var held int64
	for _, f := range s.files {
		held += f.size
	}
	if held != s.total {
		t.Fatalf("the spool counts %d bytes, its files hold %d", s.total, held)
	}
	for tok := range s.files {
		s.remove(tok)
	}
}
