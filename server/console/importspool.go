package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"dataservice/store"
)

// The import tool keeps an uploaded file on the server between Check and Import, so a
// person checks a file and then imports it (or fixes it and checks again) without
// choosing it again: browsers never keep a chosen file across a page load. The file
// goes to a temporary file of this process, named by a random token the form carries;
// the token is bound to the session that uploaded it. The temporary file is unlinked
// as soon as it is written and read through its open descriptor, so no upload outlives
// the process on disk, whatever way it ends.
const (
	// spoolTTL is how long a kept file waits for its Import.
	spoolTTL = 30 * time.Minute
	// spoolPerSession is how many files one session keeps at a time: a newer upload
	// replaces the oldest.
	spoolPerSession = 3
	// spoolTotalBodies bounds the bytes kept for every session together, in request
	// bodies (MaxBody): past it a file is not kept and must be chosen again.
	spoolTotalBodies = 4
	// spoolMaxFiles bounds the files kept for every session together (open
	// descriptors): past it a file is not kept either.
	spoolMaxFiles = 64
)

// errSpoolGone and errSpoolForeign are the answers for a token that names no kept file
// (expired, imported, unknown here) or one another session kept.
var (
	errSpoolGone    = fmt.Errorf("the file kept from the last Check is no longer on the server (kept %d minutes at most, removed once imported, and kept by the server that answered the Check): choose it again", int(spoolTTL/time.Minute))
	errSpoolForeign = fmt.Errorf("the kept file named by this form belongs to another session: choose the file again")
)

// importSpool is the import tool's kept files, by token.
type importSpool struct {
	mu       sync.Mutex
	files    map[string]*keptFile
	total    int64
	maxTotal int64
	now      func() time.Time
	log      *slog.Logger
}

// keptFile is one kept upload.
type keptFile struct {
	owner [32]byte // the session's binding (sessionBinding)
	name  string
	file  *os.File // open; unlinked already unless path is set
	path  string   // set when the system refused to unlink an open file
	size  int64
	at    time.Time
}

func newImportSpool(maxBody int64, log *slog.Logger) *importSpool {
	return &importSpool{files: map[string]*keptFile{}, maxTotal: spoolTotalBodies * maxBody, now: time.Now, log: log}
}

// sessionBinding is what ties a kept file to its session: a hash of the session's id
// and its CSRF token (random per session), so a reused id is another session.
func sessionBinding(sess *store.Session) [32]byte {
	return sha256.Sum256([]byte(strconv.FormatInt(sess.ID, 10) + "\x00" + sess.CSRF))
}

// keep stores body as the file name uploaded in sess and returns its token; it returns
// "" (and keeps nothing) when the spool is full or the disk refuses, which only means
// the file must be chosen again.
func (s *importSpool) keep(sess *store.Session, name string, body []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	owner := sessionBinding(sess)
	var mine []string
	for tok, f := range s.files {
		if f.owner == owner {
			mine = append(mine, tok)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return s.files[mine[i]].at.Before(s.files[mine[j]].at) })
	for len(mine) >= spoolPerSession {
		s.remove(mine[0])
		mine = mine[1:]
	}
	if s.total+int64(len(body)) > s.maxTotal || len(s.files) >= spoolMaxFiles {
		s.log.Warn("import spool full: file not kept", "size", len(body), "kept_bytes", s.total, "kept_files", len(s.files))
		return ""
	}
	f, err := os.CreateTemp("", "dataservice-import-")
	if err != nil {
		s.log.Error("import spool file", "error", err)
		return ""
	}
	kf := &keptFile{owner: owner, name: name, file: f, size: int64(len(body)), at: s.now()}
	if err := os.Remove(f.Name()); err != nil {
		kf.path = f.Name() // removed with the kept file instead
	}
	if _, err := f.Write(body); err != nil {
		s.close(kf)
		s.log.Error("import spool write", "error", err)
		return ""
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	s.files[tok] = kf
	s.total += kf.size
	return tok
}

// open returns the kept file of token and its name, if sess kept it.
func (s *importSpool) open(sess *store.Session, token string, limit int64) (name string, body []byte, err error) {
	s.mu.Lock()
	s.sweep()
	f, ok := s.files[token]
	s.mu.Unlock()
	if !ok {
		return "", nil, errSpoolGone
	}
	owner := sessionBinding(sess)
	if subtle.ConstantTimeCompare(f.owner[:], owner[:]) != 1 {
		return "", nil, errSpoolForeign
	}
	body, err = io.ReadAll(io.NewSectionReader(f.file, 0, min(f.size, limit+1)))
	if errors.Is(err, os.ErrClosed) {
		return "", nil, errSpoolGone // removed meanwhile (an Import in another tab)
	}
	if err != nil {
		return "", nil, fmt.Errorf("read kept file: %w", err)
	}
	return f.name, body, nil
}

// drop removes the kept file of token (once imported), if sess kept it.
func (s *importSpool) drop(sess *store.Session, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[token]; ok && f.owner == sessionBinding(sess) {
		s.remove(token)
	}
}

// dropSession removes every file sess kept (it signed out).
func (s *importSpool) dropSession(sess *store.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := sessionBinding(sess)
	for tok, f := range s.files {
		if f.owner == owner {
			s.remove(tok)
		}
	}
	s.sweep()
}

// sweep removes the files past their time; s.mu is held.
func (s *importSpool) sweep() {
	cut := s.now().Add(-spoolTTL)
	for tok, f := range s.files {
		if f.at.Before(cut) {
			s.remove(tok)
		}
	}
}

// remove forgets token and deletes its file; s.mu is held.
func (s *importSpool) remove(tok string) {
	f := s.files[tok]
	delete(s.files, tok)
	s.total -= f.size
	s.close(f)
}

// close releases f's descriptor, and its name when it could not be unlinked earlier.
func (s *importSpool) close(f *keptFile) {
	if err := f.file.Close(); err != nil {
		s.log.Error("import spool close", "error", err)
	}
	if f.path != "" {
		if err := os.Remove(f.path); err != nil && !os.IsNotExist(err) {
			s.log.Error("import spool remove", "error", err)
		}
	}
}
