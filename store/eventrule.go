package store

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"dataservice/internal/clip"
	"dataservice/rules"
	"dataservice/store/model"
)

// EventRuleClass is the built-in class of event rules.
const EventRuleClass = "_eventrule"

// EventActions are the actions an event rule may watch, in the order the docs give.
var EventActions = []string{"create", "update", "delete", "enable", "disable", "rename"}

// MaxWebhookURL bounds the length of an event rule's webhook_url.
const MaxWebhookURL = 2048

// EventCondition is the stored form of an event rule's condition v: a list (a load's
// `condition: [field_match, env, prod]`, a JSON array) becomes its YAML flow text,
// anything else is kept for the value's own checks. Whether the text parses is
// checked with the rest of the rule (checkEventRule), so every problem is named at once.
func EventCondition(v any) (any, error) {
	items, ok := v.([]any)
	if !ok {
		return v, nil
	}
	if len(items) == 0 {
		return nil, nil
	}
	text, err := rules.ConditionText(items)
	if err != nil {
		return nil, model.Errorf(model.EInvalid, "%s", err.Error())
	}
	return text, nil
}

// checkEventRule checks the new state of an event rule as a whole, after its values
// are valid one by one, and names every problem at once: the schemas watched exist,
// are instances' classes (not _schema or _permission) and are the writer's to watch
// (a built-in class needs its write permission, as a grant is contained, and any
// other schema its read permission); the actions are known; there is something to do
// (webhook_url or pipeline, or both); the URL is an absolute http(s) URL with a host
// and no user information; a webhook has a secret to sign with; the pipeline exists;
// the condition parses and looks at no secret field; a changed webhook_url comes with
// a new secret (the stored one signs for the address its writer chose, not for
// another); the writer could run the pipeline over the schemas watched. auth is the
// writer (nil: every permission); old is the stored rule (nil for a create). Other
// classes pass.
func (tx *Tx) checkEventRule(ctx context.Context, auth *model.Auth, s *model.Schema, old, next *Instance) error {
	if s.Keyname != EventRuleClass || tx.migration {
		return nil
	}
	var probs model.Problems
	add := func(field, format string, args ...any) {
		probs.Add(field, model.Errorf(model.EInvalid, field+": "+format, args...))
	}
	// What the rule names must exist, and its pipeline be runnable, only while it is
	// enabled: a rule whose pipeline or schema was deleted or disabled can still be
	// disabled or edited; enabling it checks them again.
	armed := next.IsEnabled
	var watched []*model.Schema
	for _, name := range stringList(next.Data["schemas"]) {
		if name == "_schema" || name == "_permission" {
			add("schemas", "%s cannot be watched: it holds definitions, not instances", name)
			continue
		}
		ws, err := tx.Schema(ctx, name)
		if IsNotFound(err) {
			if armed {
				add("schemas", "no schema %s", clip.Quote(name))
			}
			continue
		}
		if err != nil {
			return err
		}
		if need, ok := MayWatch(auth, ws); !ok {
			how := ""
			if !strings.HasPrefix(ws.Keyname, "_") {
				how = " (reading it)"
			}
			add("schemas", "watching %s needs %s%s, which the writer does not hold", ws.Keyname, need, how)
			continue
		}
		watched = append(watched, ws)
	}
	for _, a := range stringList(next.Data["actions"]) {
		if !isEventAction(a) {
			add("actions", "%s is not an action (expected %s)", clip.Quote(a), strings.Join(EventActions, ", "))
		}
	}
	if text, _ := next.Data["condition"].(string); text != "" {
		cond, err := rules.ParseCondition(text)
		if err != nil {
			probs.Add("condition", model.Errorf(model.EInvalid, "%s", err.Error()))
		}
		for _, name := range cond.Fields() {
			for _, ws := range watched {
				if f := ws.Field(name); f != nil && f.Dataformat == "secret" {
					add("condition", "%s is a secret field of %s: a condition cannot look at a secret", name, ws.Keyname)
				}
			}
		}
	}
	hook, _ := next.Data["webhook_url"].(string)
	pipe, _ := next.Data["pipeline"].(string)
	if hook == "" && pipe == "" {
		add("webhook_url", "an event rule needs webhook_url (to deliver a webhook) or pipeline (to run one), or both")
	}
	if hook != "" {
		if msg := webhookURLProblem(hook); msg != "" {
			add("webhook_url", "%s", msg)
		}
		sec, _ := next.Data["secret"].(string)
		if sec == "" {
			add("secret", "a webhook rule needs a secret: deliveries are signed with it (HMAC-SHA256) so the receiver "+
				"can tell them from forgeries; give one (it is stored encrypted and never shown again)")
		} else if old != nil {
			oldHook, _ := old.Data["webhook_url"].(string)
			oldSec, _ := old.Data["secret"].(string)
			if hook != oldHook && sec == oldSec {
				add("secret", "changing webhook_url needs a new secret: the stored one was given for the old address "+
					"and stays with it; give a new secret with the new webhook_url")
			}
		}
	}
	if pipe != "" && armed {
		if _, err := tx.Instance(ctx, "_pipeline", pipe); IsNotFound(err) {
			add("pipeline", "no pipeline %s", clip.Quote(pipe))
		} else if err != nil {
			return err
		}
		var names []string
		for _, ws := range watched {
			names = append(names, ws.Keyname)
		}
		if err := probs.Add("pipeline", tx.checkArmedRun(ctx, auth, pipe, names, false)); err != nil {
			return err
		}
	}
	return probs.Err()
}

// MayWatch reports whether auth may watch schema s with an event rule, and the
// permission it needs: for a built-in class (keys, accounts, rules) its write
// permission, since events tell what changes in it and watching one is writing it, as
// granting a permission is holding it; for any other schema its read permission.
// Validation demands it of the rule's writer and the delivery of each event of the
// rule's author again. nil auth holds every permission.
func MayWatch(auth *model.Auth, s *model.Schema) (need string, ok bool) {
	if strings.HasPrefix(s.Keyname, "_") {
		return model.WritePermission(s, model.ActionUpdate), model.CanWrite(auth, s, model.ActionUpdate)
	}
	return model.ReadPermission(s), model.CanRead(auth, s)
}

// isEventAction reports whether a is one of EventActions.
func isEventAction(a string) bool {
	for _, x := range EventActions {
		if a == x {
			return true
		}
	}
	return false
}

// webhookURLProblem says what is wrong with a webhook URL ("" when nothing is). The
// URL is not quoted: it may carry a token.
func webhookURLProblem(raw string) string {
	if len(raw) > MaxWebhookURL {
		return fmt.Sprintf("%d characters is longer than the %d a URL may have", len(raw), MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "not an http:// or https:// URL"
	case u.Opaque != "" || u.Hostname() == "":
		return "the URL has no host (expected e.g. https://receiver.example/hook)"
	case u.User != nil:
		return "the URL carries user information (user:password@): put credentials in the receiver's check of the signature, not in the URL"
	}
	return ""
}

// EventTarget is what an event rule does, as stored now: where its webhook goes and
// with what secret, which pipeline it runs, and as whom.
type EventTarget struct {
	Rule, URL, Pipeline, Author string
	// AuthorID is the author's instance id (AuthOf follows it).
	AuthorID int64
	// Secret is the decrypted signing secret; never logged or returned by any API.
	Secret  []byte
	Enabled bool
}

// EventRuleTarget reads an event rule's current target, its secret opened with the
// database's key (an error naming the setting when there is no key, or the key does
// not open it). A rule that does not exist is not found.
func (db *DB) EventRuleTarget(ctx context.Context, rule string) (*EventTarget, error) {
	in, err := db.Instance(ctx, EventRuleClass, rule)
	if err != nil {
		return nil, err
	}
	t := &EventTarget{Rule: in.Keyname, Enabled: in.IsEnabled}
	t.URL, _ = in.Data["webhook_url"].(string)
	t.Pipeline, _ = in.Data["pipeline"].(string)
	t.Author, _ = in.Data[AuthorField].(string)
	t.AuthorID = authorIDOf(in)
	if sealed, _ := in.Data["secret"].(string); sealed != "" {
		if t.Secret, err = db.OpenSecret(sealed); err != nil {
			if model.HasCode(err, model.EInvalid) {
				return nil, model.Errorf(model.EInvalid, "event rule %s: %s", in.Keyname, ErrorMessage(err))
			}
			return nil, fmt.Errorf("event rule %s: %w", in.Keyname, err)
		}
	}
	return t, nil
}

// AuthOf re-reads the authorisation context of an author ("system", "user:LOGIN",
// "apikey:NAME") recorded with its instance id (author_id), as a task's submitter is
// re-read when the task runs: the principal is followed by its id (through a rename),
// so a key revoked and created again under the same name, or a user deleted and
// created again with the same login, is another principal and not the author. A
// principal that is gone, disabled or expired, or an author recorded without its id,
// is a forbidden error; the permissions are the ones held now.
func (db *DB) AuthOf(ctx context.Context, author string, id int64) (*model.Auth, error) {
	kind, name, _ := strings.Cut(author, ":")
	switch {
	case author == "system":
		return model.SystemAuth(), nil
	case (kind == model.AuthUser || kind == model.AuthAPIKey) && name != "" && id <= 0:
		return nil, model.Errorf(model.EForbidden, "author %s has no recorded identity (%s): write it again to act as its writer",
			clip.Quote(author), AuthorIDField)
	case kind == model.AuthUser && name != "":
		in, err := db.InstanceByID(ctx, "_user", id)
		if IsNotFound(err) {
			return nil, model.Errorf(model.EForbidden, "user %s no longer exists", name)
		}
		if err != nil {
			return nil, err
		}
		return db.Refresh(ctx, &model.Auth{Kind: model.AuthUser, Name: in.Keyname, UserID: id})
	case kind == model.AuthAPIKey && name != "":
		return db.Refresh(ctx, &model.Auth{Kind: model.AuthAPIKey, Name: name, KeyID: id})
	}
	return nil, model.Errorf(model.EInvalid, "author %s is not system, user:LOGIN or apikey:NAME", clip.Quote(author))
}
