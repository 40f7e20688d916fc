package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"dataservice/store"
)

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
	// The API's throttle (store.Throttle): failures here and with HTTP Basic or key
	// secrets count together, per address and per login.
	addr := c.proxies.Of(r)
	throttle := c.db.Throttle()
	if wait := throttle.Wait(ctx, addr, login); wait > 0 {
		secs := int64((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		d.Error = fmt.Sprintf("Too many failed sign-ins. Try again in %d seconds.", secs)
		c.render(w, r, nil, http.StatusTooManyRequests, "login", "Sign in", d)
		return
	}
	refuse := func() {
		if err := throttle.Fail(ctx, addr, login); err != nil {
			c.log.Error("credential throttle", "error", err)
		}
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
	// Verified even for an unknown or disabled login, so all cost the same.
	good, err := c.db.CheckCredential("user:"+login, password, stored, err == nil && u.IsEnabled)
	if errors.Is(err, store.ErrCredentialBusy) {
		// Not checked: no refusal is counted against this address or login.
		throttle.Release(addr)
		w.Header().Set("Retry-After", "1")
		d.Error = "The server is busy checking other sign-ins; your password was not checked. Try again in a moment."
		c.render(w, r, nil, http.StatusServiceUnavailable, "login", "Sign in", d)
		return
	}
	if !good {
		refuse()
		return
	}
	if err := throttle.Succeed(ctx, addr, login); err != nil {
		c.log.Error("credential throttle", "error", err)
	}
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
	c.spool.dropSession(q.sess)
	c.clearCookie(w)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
