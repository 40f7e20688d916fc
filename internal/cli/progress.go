package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progressWriter draws one progress line. On a terminal the line is redrawn in place
// and cleared before any log line is written (logs go through logs()), so log lines
// never end up glued to it; elsewhere a line is printed when it changes, at most once
// a second (and always the final one).
type progressWriter struct {
	mu     sync.Mutex
	out    io.Writer
	tty    bool
	shown  bool // a progress line is on the terminal, without a newline
	last   string
	lastAt time.Time
}

func newProgressWriter(out io.Writer) *progressWriter {
	p := &progressWriter{out: out}
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// show draws line; final forces it out.
func (p *progressWriter) show(line string, final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.out, "\r\x1b[K%s", line)
		p.shown = true
		return
	}
	if line == p.last || (!final && time.Since(p.lastAt) < time.Second) {
		return
	}
	fmt.Fprintln(p.out, line)
	p.last, p.lastAt = line, time.Now()
}

// end finishes the line on a terminal, so what follows starts on a new one.
func (p *progressWriter) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintln(p.out)
		p.shown = false
	}
}

// logs wraps w (where log lines go): each write first clears the progress line.
func (p *progressWriter) logs(w io.Writer) io.Writer { return &logWriter{p: p, w: w} }

type logWriter struct {
	p *progressWriter
	w io.Writer
}

func (l *logWriter) Write(b []byte) (int, error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.p.shown {
		fmt.Fprint(l.p.out, "\r\x1b[K")
		l.p.shown = false
	}
	return l.w.Write(b)
}
