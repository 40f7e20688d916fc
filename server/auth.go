package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"dataservice/store"
	"dataservice/store/model"
)

// principal is what the authorisation step yields for a request.
type principal struct {
	allowed bool
	auth    *model.Auth
	// credKind and credName are what was presented ("apikey"/"basic", key name or
	// login), for the access log; never the secret.
	credKind, credName string
	// wait is set when the credentials were refused unchecked by the credential
	// throttle: the caller gets 429 and may retry after wait.
	wait time.Duration
	// busy is set when the credentials were not checked because too many checks were
	// waiting (store.ErrCredentialBusy): the caller gets 503 and may retry.
	busy bool
}

// readOnly reports whether the credentials cannot change anything.
func (p *principal) readOnly() bool { return p.auth != nil && p.auth.ReadOnly }

// has reports whether an allowed caller holds permission perm.
func (p *principal) has(perm string) bool { return p.allowed && p.auth.Has(perm) }

type ctxKey struct{}

func principalOf(r *http.Request) *principal {
	if p, ok := r.Context().Value(ctxKey{}).(*principal); ok {
		return p
	}
	return &principal{}
}

// denied answers a caller that is not allowed (401) or lacks perm (403); it returns
// true when it answered.
func (s *server) denied(w http.ResponseWriter, r *http.Request, perms ...string) bool {
	p := principalOf(r)
	if !p.allowed && p.wait > 0 {
		secs := int64((p.wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		s.writeError(w, r, http.StatusTooManyRequests,
			fmt.Sprintf("too many failed authentication attempts; retry after %d seconds", secs))
		return true
	}
	if !p.allowed && p.busy {
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, http.StatusServiceUnavailable, "too many credential checks in progress; retry shortly")
		return true
	}
	if !p.allowed {
		// One message for missing, wrong, disabled, expired and filtered credentials
		// (a 401 always says "authentication required"): it never says which part failed.
		s.writeError(w, r, http.StatusUnauthorized, "authentication required")
		return true
	}
	for _, perm := range perms {
		if !p.auth.Has(perm) {
			// Names only what this request needs: never what the caller (or anyone) holds.
			s.writeError(w, r, http.StatusForbidden, "permission denied: this request needs "+perm)
			return true
		}
	}
	return false
}

// authenticate is the authorisation step: it reads the credentials and puts the
// principal in the request context. It never answers the request itself.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.principalFor(r)
		noteCredentials(r, p)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)))
	})
}

func (s *server) principalFor(r *http.Request) *principal {
	ctx := r.Context()
	h := r.Header.Get("Authorization")
	xk := r.Header.Get("X-Service-Key")
	scheme, rest, _ := strings.Cut(h, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		key, secret, ok := ParseKeyCredential(rest, ":")
		return presented(s.keyPrincipal(ctx, r, key, secret, ok), "apikey", key, ok)
	case xk != "":
		key, secret, ok := ParseKeyCredential(xk, " ")
		return presented(s.keyPrincipal(ctx, r, key, secret, ok), "apikey", key, ok)
	case strings.EqualFold(scheme, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			return &principal{credKind: "basic"}
		}
		login, password, ok := strings.Cut(string(raw), ":")
		ok = ok && validCredential(login, password)
		return presented(s.userPrincipal(ctx, r, login, password, ok), "basic", login, ok)
	case h != "":
		return &principal{credKind: "other"}
	}
	return &principal{}
}

// presented notes the kind and, when the credentials were well-formed, the name
// (key name or login) on p. A malformed credential's "name" may be a secret typed in
// the wrong place, so it is not kept.
func presented(p *principal, kind, name string, wellFormed bool) *principal {
	p.credKind = kind
	if wellFormed {
		if len(name) > 64 {
			name = name[:64]
		}
		p.credName = name
	}
	return p
}

// ParseKeyCredential splits API key credentials at sep: "KEYNAME:SECRET" (Bearer) or
// "KEYNAME SECRET" (X-Service-Key). ok is false for anything malformed.
func ParseKeyCredential(v, sep string) (key, secret string, ok bool) {
	key, secret, ok = strings.Cut(strings.TrimSpace(v), sep)
	key, secret = strings.TrimSpace(key), strings.TrimSpace(secret)
	return key, secret, ok && validCredential(key, secret)
}

func validCredential(key, secret string) bool {
	return key != "" && secret != "" && len(key) <= 256 && len(secret) <= 1024 &&
		utf8.ValidString(key) && utf8.ValidString(secret)
}

func (s *server) keyPrincipal(ctx context.Context, r *http.Request, key, secret string, ok bool) *principal {
	refused := &principal{}
	if !ok {
		return refused
	}
	// A key's name is no secret to guess: wrong key secrets count for the address only.
	client := s.proxies.Of(r)
	throttle := s.db.Throttle()
	if wait := throttle.Wait(ctx, client, ""); wait > 0 {
		return &principal{wait: wait}
	}
	auth, in, err := s.db.KeyAuth(ctx, key)
	stored := ""
	if in != nil {
		stored, _ = in.Data["secret"].(string)
	}
	// An unknown, disabled, expired or filtered key costs one full verification, as a
	// wrong secret does, even when its secret is right (and was cached before).
	usable := err == nil && clientAllowed(client, in.Data["ip_filter"])
	good, err := s.db.CheckCredential("apikey:"+key, secret, stored, usable)
	switch {
	case errors.Is(err, store.ErrCredentialBusy):
		// Not checked: neither a refusal to count nor a success.
		throttle.Release(client)
		return &principal{busy: true}
	case !good:
		if err := throttle.Fail(ctx, client, ""); err != nil {
			s.log.Error("credential throttle", "error", err)
		}
		return refused
	}
	if err := throttle.Succeed(ctx, client, ""); err != nil {
		s.log.Error("credential throttle", "error", err)
	}
	s.touchKey(ctx, in)
	return &principal{allowed: true, auth: auth}
}

func (s *server) userPrincipal(ctx context.Context, r *http.Request, login, password string, ok bool) *principal {
	refused := &principal{}
	if !ok || !validCredential(login, password) {
		return refused
	}
	// The console's sign-in uses the same throttle (per address and per login).
	client := s.proxies.Of(r)
	throttle := s.db.Throttle()
	if wait := throttle.Wait(ctx, client, login); wait > 0 {
		return &principal{wait: wait}
	}
	u, err := s.db.Instance(ctx, "_user", login)
	stored := ""
	if err == nil {
		stored, _ = u.Data["password"].(string)
	}
	good, err := s.db.CheckCredential("user:"+login, password, stored, err == nil && u.IsEnabled)
	switch {
	case errors.Is(err, store.ErrCredentialBusy):
		throttle.Release(client)
		return &principal{busy: true}
	case !good:
		if err := throttle.Fail(ctx, client, login); err != nil {
			s.log.Error("credential throttle", "error", err)
		}
		return refused
	}
	if err := throttle.Succeed(ctx, client, login); err != nil {
		s.log.Error("credential throttle", "error", err)
	}
	auth, err := s.db.UserAuth(ctx, login)
	if err != nil {
		return refused
	}
	return &principal{allowed: true, auth: auth}
}

// clientAllowed applies a key's ip_filter (empty = any address) to the client address
// (clientaddr: the TCP peer, or what trusted proxies forwarded).
func clientAllowed(client string, filter any) bool {
	list, _ := filter.([]any)
	if len(list) == 0 {
		return true
	}
	addr, err := netip.ParseAddr(client)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, it := range list {
		cidr, _ := it.(string)
		if p, err := netip.ParsePrefix(cidr); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// touchKey records last_used at most once a minute per key (no revision: it is not an edit).
func (s *server) touchKey(ctx context.Context, in *store.Instance) {
	now := time.Now()
	s.lastUsedMu.Lock()
	last, seen := s.lastUsed[in.Keyname]
	if seen && now.Sub(last) < time.Minute {
		s.lastUsedMu.Unlock()
		return
	}
	s.lastUsed[in.Keyname] = now
	s.lastUsedMu.Unlock()
	if err := s.db.TouchAPIKey(ctx, in.ID, now); err != nil {
		s.log.Warn("record API key last_used", "key", in.Keyname, "error", err)
	}
}
