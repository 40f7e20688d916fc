package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"dataservice/store/model"
)

// Body is a load body received into memory or a temporary file: every entry was checked on
// the way in (the document parses and holds at most the allowed entries), so a load
// that reads it back entry by entry never fails half-way for the document's sake.
// Memory holds at most spoolInMemory bytes of it and one entry at a time whatever the
// size of the body, except a body that must be parsed whole (see ParseBody), which is
// at most MaxYAMLBody.
type Body struct {
	name    string
	dir     string
	mem     []byte   // the body, while it is small
	f       *os.File // the body, once it is not
	path    string   // set while the file could not be removed at once
	size    int64
	stream  bool
	entries []*model.Entry // the body parsed whole, when it does not stream
	// Entries is the number of entries of the body.
	Entries int
	// Warnings are the lenient parser's repairs (a body parsed whole).
	Warnings []string
}

// BodyReadError is a failure to read the body itself (the client's connection, a
// size limit of the caller's reader), as opposed to what the body says.
type BodyReadError struct{ Err error }

func (e *BodyReadError) Error() string { return "read body: " + e.Err.Error() }
func (e *BodyReadError) Unwrap() error { return e.Err }

// SpoolBody reads a load body from r, decoding it entry by entry as it arrives and
// keeping none: JSON lists object by object, YAML block sequences item by item. The
// bytes are kept in memory up to spoolInMemory, beyond it in a temporary file in dir
// (the system's temporary directory when dir is empty or not writable), unlinked at
// once. More than maxEntries entries (0: no bound) is an ETooLarge error as soon as
// the entry after the last allowed one has been read; a body that does not stream is
// parsed whole under ParseBody's rules (at most MaxYAMLBody). Errors are ParseBody's,
// or a *BodyReadError. The caller closes the Body.
func SpoolBody(name string, r io.Reader, dir string, maxEntries int) (*Body, error) {
	b := &Body{name: name, dir: dir}
	if err := b.receive(r, maxEntries); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// spoolInMemory is the size up to which a body stays in memory.
const spoolInMemory = 1 << 20

// spoolWriter keeps the body: in memory, then in the file; it remembers the first
// error.
type spoolWriter struct {
	b   *Body
	err error
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	b := w.b
	if b.f == nil && len(b.mem)+len(p) > spoolInMemory {
		if err := b.toFile(); err != nil {
			w.err = err
			return 0, err
		}
	}
	if b.f == nil {
		b.mem = append(b.mem, p...)
		b.size += int64(len(p))
		return len(p), nil
	}
	n, err := b.f.Write(p)
	b.size += int64(n)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// toFile moves the body received so far into a new temporary file.
func (b *Body) toFile() error {
	f, err := os.CreateTemp(b.dir, ".dataservice-load-*")
	if err != nil && b.dir != "" {
		f, err = os.CreateTemp("", ".dataservice-load-*")
	}
	if err != nil {
		return err
	}
	b.f = f
	// Removed at once: the open file stays readable and nothing is left behind
	// should the process die.
	if os.Remove(f.Name()) != nil {
		b.path = f.Name()
	}
	if _, err := f.Write(b.mem); err != nil {
		return err
	}
	b.mem = nil
	return nil
}

// spoolDir is the directory of the body's temporary file.
func (b *Body) spoolDir() string {
	if b.f != nil {
		return filepath.Dir(b.f.Name())
	}
	if b.dir != "" {
		return b.dir
	}
	return os.TempDir()
}

// reader reads the body back from its start.
func (b *Body) reader() io.Reader {
	if b.f == nil {
		return bytes.NewReader(b.mem)
	}
	return io.NewSectionReader(b.f, 0, b.size)
}

// readRecorder remembers the first error of its reader other than io.EOF.
type readRecorder struct {
	r   io.Reader
	err error
}

func (rr *readRecorder) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && rr.err == nil {
		rr.err = err
	}
	return n, err
}

func (b *Body) receive(r io.Reader, maxEntries int) error {
	rr := &readRecorder{r: r}
	w := &spoolWriter{b: b}
	tee := io.TeeReader(rr, w)
	n := 0
	err := streamDocument(b.name, tee, MaxYAMLBody, func(*model.Entry) error {
		if maxEntries > 0 && n >= maxEntries {
			return tooManyEntries(b.name, maxEntries)
		}
		n++
		return nil
	})
	switch {
	case w.err != nil && noSpace(w.err):
		return model.DiskFullError("the load body spooled in "+b.spoolDir(), w.err)
	case w.err != nil:
		return fmt.Errorf("spool load body: %w", w.err)
	case rr.err != nil:
		return &BodyReadError{rr.err}
	case err == nil:
		b.stream, b.Entries = true, n
		return nil
	case !errors.Is(err, ErrNotStreamable):
		return err
	}
	// Parsed whole, as ParseBody does: the rest of the body first.
	if _, err := io.Copy(w, rr); err != nil {
		if rr.err != nil {
			return &BodyReadError{rr.err}
		}
		if noSpace(err) {
			return model.DiskFullError("the load body spooled in "+b.spoolDir(), err)
		}
		return fmt.Errorf("spool load body: %w", err)
	}
	if b.size > MaxYAMLBody {
		var ns *notStreamable
		reason := ""
		if errors.As(err, &ns) {
			if ns.json != nil {
				return model.Errorf(model.EInvalid, "%s: invalid JSON: %v", b.name, ns.json)
			}
			reason = " (" + ns.reason + ")"
		}
		return model.Errorf(model.ETooLarge, "%s: a load body over %d MiB must be JSON, or YAML that is read item by item: a block "+
			"sequence whose items start with \"- \" at column 0, share no anchors and are at most %d MiB each; this one is not%s",
			b.name, MaxYAMLBody>>20, MaxYAMLBody>>20, reason)
	}
	data, err := io.ReadAll(b.reader())
	if err != nil {
		return fmt.Errorf("spool load body: %w", err)
	}
	entries, warnings, err := ParseBody(b.name, data, maxEntries)
	if err != nil {
		return err
	}
	b.entries, b.Entries, b.Warnings = entries, len(entries), warnings
	return nil
}

// Each calls yield with every entry of the body in order (a LoadStream source),
// reading a streamed body back from its file.
func (b *Body) Each(yield func(*model.Entry) error) error {
	if !b.stream {
		for _, e := range b.entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}
	var fnErr error
	err := streamDocument(b.name, b.reader(), MaxYAMLBody, func(e *model.Entry) error {
		fnErr = yield(e)
		return fnErr
	})
	if err != nil && fnErr == nil {
		// The file read back is the one checked: anything else is an internal error.
		return fmt.Errorf("read spooled load body: %w", err)
	}
	return err
}

// Close removes the temporary file.
func (b *Body) Close() error {
	b.mem = nil
	if b.f == nil {
		return nil
	}
	err := b.f.Close()
	if b.path != "" {
		os.Remove(b.path)
	}
	return err
}

// noSpace reports whether err is the system's ENOSPC: the filesystem holding the
// spooled body is full.
func noSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
