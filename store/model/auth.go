package model

// Auth is an authorisation context: who acts and which permissions they hold. It is
// stored with a task (as JSON) so the task acts with its submitter's rights.
type Auth struct {
	Kind     string   `json:"kind"` // system | user | apikey
	Name     string   `json:"name"` // login or key keyname
	User     string   `json:"user,omitempty"`
	UserID   int64    `json:"user_id,omitempty"`
	All      bool     `json:"all,omitempty"`
	Perms    []string `json:"perms,omitempty"`
	Deny     []string `json:"deny,omitempty"`
	ReadOnly bool     `json:"readonly,omitempty"`
	// KeyID is an API key's instance id: the key itself, which a key revoked and
	// created again under the same name does not share (ids are never reused). Tasks
	// follow it. 0 for other kinds (and in tasks stored before it was recorded).
	KeyID int64 `json:"key_id,omitempty"`

	set, deny map[string]bool
}

// Kinds of Auth: who acts.
const (
	AuthSystem = "system" // the CLI and the start-up sequence
	AuthUser   = "user"   // a user account (basic auth or a console session)
	AuthAPIKey = "apikey" // an API key
)

// SystemAuth holds every permission; the CLI and start-up act with it.
func SystemAuth() *Auth { return &Auth{Kind: AuthSystem, Name: "system", All: true} }

// Has reports whether the context holds permission p.
func (a *Auth) Has(p string) bool {
	if a == nil {
		return false
	}
	if a.set == nil {
		a.set, a.deny = toSet(a.Perms), toSet(a.Deny)
	}
	if a.deny[p] {
		return false
	}
	return a.All || a.set[p]
}

// HasAll reports whether the context holds every permission.
func (a *Auth) HasAll() bool { return a != nil && a.All && len(a.Deny) == 0 }

// Author is the revision author for writes made with this context.
func (a *Auth) Author() string {
	switch {
	case a == nil || a.Kind == AuthSystem:
		return "system"
	case a.Kind == AuthAPIKey:
		return "apikey:" + a.Name
	}
	return "user:" + a.Name
}

// AuthorID is the instance id of the principal acting with this context, recorded
// beside Author so the principal itself is followed, not whoever holds its name
// later: an API key's id, a user's id, 0 for the system.
func (a *Auth) AuthorID() int64 {
	switch {
	case a == nil || a.Kind == AuthSystem:
		return 0
	case a.Kind == AuthAPIKey:
		return a.KeyID
	}
	return a.UserID
}

func toSet(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, p := range l {
		m[p] = true
	}
	return m
}
