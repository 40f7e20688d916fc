package testkit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"dataservice/bootstrap"
)

// Buffer is a goroutine-safe buffer, for a server's or a child process's output.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TBWriter sends each write to tb.Log.
type TBWriter struct{ TB testing.TB }

func (w TBWriter) Write(p []byte) (int, error) {
	w.TB.Helper()
	w.TB.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Logger is a text logger writing records at level or above to tb.Log.
func Logger(tb testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(TBWriter{tb}, &slog.HandlerOptions{Level: level}))
}

// Record is one record a Recorder saw, attributes rendered as text.
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// Recorder keeps every record of the loggers it hands out. Its zero value is ready.
type Recorder struct {
	mu      sync.Mutex
	records []Record
}

// Logger returns a logger whose records the recorder keeps and echoes to tb.Log
// while tb runs.
func (r *Recorder) Logger(tb testing.TB) *slog.Logger {
	s := &echo{tb: tb}
	tb.Cleanup(func() {
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
	})
	return slog.New(&recordHandler{rec: r, echo: s})
}

// All returns a copy of the records seen so far.
func (r *Recorder) All() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Reset forgets the records seen so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.records = nil
	r.mu.Unlock()
}

// Find returns the records with that level and message.
func (r *Recorder) Find(level slog.Level, msg string) []Record {
	var out []Record
	for _, e := range r.All() {
		if e.Level == level && e.Msg == msg {
			out = append(out, e)
		}
	}
	return out
}

// AtLeast returns the records at level or above.
func (r *Recorder) AtLeast(level slog.Level) []Record {
	var out []Record
	for _, e := range r.All() {
		if e.Level >= level {
			out = append(out, e)
		}
	}
	return out
}

// echo is where one logger of a recorder echoes; it stops when its test ends.
type echo struct {
	mu   sync.Mutex
	tb   testing.TB
	done bool
}

type recordHandler struct {
	rec   *Recorder
	echo  *echo
	attrs []slog.Attr
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	e := Record{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		e.Attrs[a.Key] = a.Value.Resolve().String()
	}
	r.Attrs(func(a slog.Attr) bool {
		e.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	h.rec.mu.Lock()
	h.rec.records = append(h.rec.records, e)
	h.rec.mu.Unlock()
	level := r.Level.String()
	if r.Level >= bootstrap.LevelCritical {
		level = "CRITICAL"
	}
	msg := fmt.Sprintf("%s %s %v", level, r.Message, e.Attrs)
	if len(msg) > 400 {
		msg = msg[:400] + "..."
	}
	h.echo.mu.Lock()
	defer h.echo.mu.Unlock()
	if !h.echo.done {
		h.echo.tb.Log(msg)
	}
	return nil
}

func (h *recordHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordHandler{rec: h.rec, echo: h.echo, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *recordHandler) WithGroup(string) slog.Handler { return h }
