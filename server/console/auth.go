package console

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"
)

// Sign-in throttling: failed attempts are counted per client address and per login in
// a sliding window; past the limit, attempts are refused without checking the password
// until the window has passed.
const (
	throttleWindow   = 15 * time.Minute
	throttlePerLogin = 5
	throttlePerAddr  = 20
	throttleMaxKeys  = 10000
)

type throttle struct {
	mu    sync.Mutex
	now   func() time.Time
	fails map[string][]time.Time
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, fails: map[string][]time.Time{}}
}

// recent returns key's failures inside the window (pruning older ones).
func (t *throttle) recent(key string) int {
	cut := t.now().Add(-throttleWindow)
	l := t.fails[key]
	i := 0
	for i < len(l) && l[i].Before(cut) {
		i++
	}
	if i == len(l) {
		delete(t.fails, key)
		return 0
	}
	t.fails[key] = l[i:]
	return len(l) - i
}

// blocked reports whether a sign-in from addr for login must be refused now.
func (t *throttle) blocked(addr, login string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recent("a:"+addr) >= throttlePerAddr || t.recent("l:"+login) >= throttlePerLogin
}

func (t *throttle) fail(addr, login string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.fails) >= throttleMaxKeys {
		// Bounded memory: drop keys whose failures are all outside the window.
		for k := range t.fails {
			t.recent(k)
		}
	}
	now := t.now()
	for _, k := range []string{"a:" + addr, "l:" + login} {
		if l := t.fails[k]; len(l) < throttlePerAddr || len(t.fails) < throttleMaxKeys {
			t.fails[k] = append(l, now)
		}
	}
}

func (t *throttle) succeed(login string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.fails, "l:"+login)
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// safeNext keeps only local paths as the place to go after signing in. Browsers drop
// tabs and newlines from a Location and read backslashes as slashes ("/\t/host" is
// "//host"), so a next holding a control character or a backslash is refused too.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/login") ||
		strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return "/"
	}
	return next
}

type loginData struct {
	Login, Next, Error string
}

// loginForm: GET /login.
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if q, ok := c.session(r.Context(), w, r); ok && q != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, http.StatusOK, "login", "Sign in", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

// loginPost: POST /login — origin check, throttle, password check (as the API checks
// it), then a new session.
func (c *Console) loginPost(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	ctx := r.Context()
	login := strings.TrimSpace(r.PostFormValue("login"))
	password := r.PostFormValue("password")
	d := loginData{Login: login, Next: safeNext(r.PostFormValue("next"))}
	if why := c.originProblem(r); why != "" {
		d.Error = "The sign-in form was refused: " + why + "."
		c.render(w, r, nil, http.StatusForbidden, "login", "Sign in", d)
		return
	}
	addr := clientAddr(r)
	if c.throttle.blocked(addr, login) {
		d.Error = "Too many failed sign-ins. Wait a few minutes and try again."
		c.render(w, r, nil, http.StatusTooManyRequests, "login", "Sign in", d)
		return
	}
	refuse := func() {
		c.throttle.fail(addr, login)
		d.Error = "Wrong login or password, or the account is disabled."
		c.render(w, r, nil, http.StatusUnauthorized, "login", "Sign in", d)
	}
	if login == "" || password == "" || len(login) > 256 || len(password) > 1024 || !utf8.ValidString(login) {
		refuse()
		return
	}
	u, err := c.db.Instance(ctx, "_user", login)
	stored := ""
	if err == nil {
		stored, _ = u.Data["password"].(string)
	}
	// Verify even for an unknown login so both cost the same.
	good := c.db.VerifySecretCached("user:"+login, password, stored)
	if err != nil || !good || !u.IsEnabled {
		refuse()
		return
	}
	c.throttle.succeed(login)
	lim := c.db.ConsoleSessionLimits(ctx)
	token, _, err := c.db.CreateSession(ctx, u.ID, u.Keyname, addr, lim)
	if err != nil {
		c.log.Error("create session", "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	c.log.Info("console sign-in", "user", u.Keyname, "address", addr)
	c.setCookie(w, token, lim)
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

// logout: POST /logout — ends this session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, q *req) {
	if err := c.db.DeleteSession(r.Context(), q.sess.ID); err != nil {
		c.fail(w, r, q, err)
		return
	}
	c.clearCookie(w)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
