package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
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
// goes to a temporary directory of this process, named by a random token the form
// carries; the token is bound to the session that uploaded it.
const (
	// spoolTTL is how long a kept file waits for its Import.
	spoolTTL = 30 * time.Minute
	// spoolPerSession is how many files one session keeps at a time: a newer upload
	// replaces the oldest.
	spoolPerSession = 3
	// spoolTotalBodies bounds the bytes kept for every session together, in request
	// bodies (MaxBody): past it a file is not kept and must be chosen again.
	spoolTotalBodies = 4
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
	dir      string // made on first use
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
	path  string
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
	if s.total+int64(len(body)) > s.maxTotal {
		s.log.Warn("import spool full: file not kept", "size", len(body), "kept_bytes", s.total)
		return ""
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "dataservice-import-")
		if err != nil {
			s.log.Error("import spool directory", "error", err)
			return ""
		}
		s.dir = dir
	}
	f, err := os.CreateTemp(s.dir, "upload-")
	if err != nil {
		s.log.Error("import spool file", "error", err)
		return ""
	}
	_, werr := f.Write(body)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		s.log.Error("import spool write", "error", werr)
		return ""
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := base64.RawURLEncoding.EncodeToString(raw[:])
	s.files[tok] = &keptFile{owner: owner, name: name, path: f.Name(), size: int64(len(body)), at: s.now()}
	s.total += int64(len(body))
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
	fh, err := os.Open(f.path)
	if err != nil {
		return "", nil, errSpoolGone // removed meanwhile (an Import in another tab)
	}
	defer fh.Close()
	body, err = io.ReadAll(io.LimitReader(fh, limit+1))
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
	if err := os.Remove(f.path); err != nil && !os.IsNotExist(err) {
		s.log.Error("import spool remove", "error", err)
	}
}
