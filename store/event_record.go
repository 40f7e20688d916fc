package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"

	"dataservice/store/model"
)

// MaxEventDepth is the longest chain of event rules a write may follow: a write made
// by a pipeline that a chain of MaxEventDepth rules submitted (each rule's pipeline
// changing what the next one watches) records no event at all.
const MaxEventDepth = 3

// eventRuleClass is the built-in class of event rules.
const eventRuleClass = "_eventrule"

// eventRule is an enabled event rule as the recording needs it.
type eventRule struct {
	keyname string
	// actions are the actions watched; empty: every action.
	actions   map[string]bool
	condition string
	webhook   bool
	pipeline  bool
}

// watches reports whether r fires on action.
func (r *eventRule) watches(action model.Action) bool {
	return len(r.actions) == 0 || r.actions[string(action)]
}

// eventRules is the enabled event rules by watched class.
type eventRules map[string][]*eventRule

// ruleCache holds the enabled event rules at a schema generation: every transaction
// that writes an event rule bumps the generation (as a schema change does), so a
// rule another process wrote is seen by the next write transaction here.
type ruleCache struct {
	mu    sync.Mutex
	set   bool
	gen   int64
	rules eventRules
}

// txEvents is what a write transaction knows of event rules and the events it recorded.
type txEvents struct {
	// rules are the rules this transaction records by (nil: not read yet).
	rules eventRules
	// reads counts the statements the transaction ran to learn its rules (the
	// generation, and the rules when they changed): at most one generation read per
	// transaction once the cache is warm.
	reads int
	// recorded counts the events recorded (told to Options.OnEvents after commit);
	// tooDeep the events a too long chain suppressed (logged once, at commit).
	recorded, tooDeep int
}

// EventConditionFunc evaluates an event rule's condition (its stored text) on a
// change: next is the state the condition reads (the new state, the old for a
// delete) and old the state before (nil on create), for `changed FIELD`.
type EventConditionFunc func(condition string, s *model.Schema, old, next *Instance) (bool, error)

// eventCondition is the hook evaluating a rule's condition; nil: conditions are not
// evaluated yet (every rule whose schemas and actions match fires).
var eventCondition EventConditionFunc

// watching returns the enabled rules that watch class cls, as the transaction sees
// them; nil when the transaction records no events (revisions off: migration and
// start-up writes; a dry run's private database). A write nobody watches costs a map
// lookup: the transaction reads the rules' generation once, at its first instance
// write, and the rules only when another transaction changed them.
func (tx *Tx) watching(ctx context.Context, cls string) ([]*eventRule, error) {
	if cls == eventRuleClass {
		// A changed rule takes effect from the next write of this transaction on,
		// and other transactions see it once this one commits (the generation bump).
		tx.touched = true
		tx.events.rules = nil
	}
	if tx.rev.Off || tx.dry != nil {
		return nil, nil
	}
	if tx.events.rules == nil {
		rules, err := tx.readEventRules(ctx)
		if err != nil {
			return nil, err
		}
		tx.events.rules = rules
	}
	return tx.events.rules[cls], nil
}

// readEventRules reads the enabled rules: from the cache when its generation is the
// one the transaction sees and the transaction changed no rule, else from the
// transaction (and into the cache when the transaction changed nothing).
func (tx *Tx) readEventRules(ctx context.Context) (eventRules, error) {
	var gen int64
	tx.events.reads++
	if err := tx.queryRowContext(ctx, "SELECT generation FROM schema_generation").Scan(&gen); err != nil {
		return nil, fmt.Errorf("read schema generation: %w", err)
	}
	c := &tx.db.ruleCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set && c.gen == gen && !tx.touched {
		return c.rules, nil
	}
	tx.events.reads++
	rules, err := loadEventRules(ctx, tx)
	if err != nil {
		return nil, err
	}
	if !tx.touched {
		c.set, c.gen, c.rules = true, gen, rules
	}
	return rules, nil
}

// loadEventRules reads every enabled event rule, by watched class.
func loadEventRules(ctx context.Context, tx *Tx) (eventRules, error) {
	rows, err := tx.queryContext(ctx, "SELECT keyname, data FROM instances WHERE classname = ? AND is_enabled = 1 ORDER BY keyname",
		eventRuleClass)
	if err != nil {
		return nil, fmt.Errorf("read event rules: %w", err)
	}
	defer rows.Close()
	rules := eventRules{}
	for rows.Next() {
		var key, raw string
		if err := rows.Scan(&key, &raw); err != nil {
			return nil, fmt.Errorf("read event rules: %w", err)
		}
		data, err := model.DecodeData(raw)
		if err != nil {
			return nil, fmt.Errorf("read event rule %s: %w", key, err)
		}
		r := &eventRule{keyname: key, actions: map[string]bool{}}
		for _, a := range textList(data["actions"]) {
			r.actions[a] = true
		}
		r.condition, _ = data["condition"].(string)
		url, _ := data["webhook_url"].(string)
		pipeline, _ := data["pipeline"].(string)
		r.webhook, r.pipeline = url != "", pipeline != ""
		for _, cls := range textList(data["schemas"]) {
			if !slices.Contains(rules[cls], r) {
				rules[cls] = append(rules[cls], r)
			}
		}
	}
	return rules, rows.Err()
}

// textList is a stored value as a list of texts (a multi field's list, or one text).
func textList(v any) []string {
	switch x := v.(type) {
	case string:
		if x != "" {
			return []string{x}
		}
	case []any:
		var out []string
		for _, it := range x {
			if s, ok := it.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// writeChange writes the revision row of one change of an instance (old: before, nil on
// create; next: after, nil on delete) and records the events it fires, in the same
// transaction: what did not commit is never announced.
func (tx *Tx) writeChange(ctx context.Context, s *model.Schema, action model.Action, old, next *Instance, before, after string) error {
	tx.noteCachedClass(s.Keyname)
	rules, err := tx.watching(ctx, s.Keyname)
	if err != nil {
		return err
	}
	key := ""
	if next != nil {
		key = next.Keyname
	} else if old != nil {
		key = old.Keyname
	}
	rev, err := tx.revisionRow(ctx, s.Keyname, key, action, before, after, len(rules) > 0)
	if err != nil || len(rules) == 0 {
		return err
	}
	return tx.recordEvents(ctx, s, action, old, next, rules, rev)
}

// eventBody is the JSON delivery body of an event, fields in this order.
type eventBody struct {
	ID       string                 `json:"id"`
	Time     string                 `json:"time"`
	Schema   string                 `json:"schema"`
	Keyname  string                 `json:"keyname"`
	Action   string                 `json:"action"`
	Changes  map[string]eventChange `json:"changes"`
	Revision *int64                 `json:"revision"`
	Actor    string                 `json:"actor"`
}

// eventChange is one changed field's values before and after (null: none).
type eventChange struct {
	Old any `json:"old"`
	New any `json:"new"`
}

// recordEvents records one event per kind of every rule among rules that fires on
// the change: it watches the action, is not in the transaction's chain, and its
// condition holds.
func (tx *Tx) recordEvents(ctx context.Context, s *model.Schema, action model.Action, old, next *Instance, rules []*eventRule, rev *int64) error {
	state := next
	if state == nil {
		state = old
	}
	chain := tx.rev.Chain
	var body *eventBody
	for _, r := range rules {
		if !r.watches(action) || slices.Contains(chain, r.keyname) {
			continue
		}
		if len(chain) >= MaxEventDepth {
			tx.events.tooDeep++
			continue
		}
		if r.condition != "" && eventCondition != nil {
			holds, err := eventCondition(r.condition, s, old, state)
			if err != nil {
				tx.db.log.Warn("event rule condition failed", "rule", r.keyname, "schema", s.Keyname,
					"keyname", state.Keyname, "error", err)
				continue
			}
			if !holds {
				continue
			}
		}
		if body == nil {
			author := tx.rev.Author
			if author == "" {
				author = "system"
			}
			body = &eventBody{Time: tx.db.now(), Schema: s.Keyname, Keyname: state.Keyname, Action: string(action),
				Changes: eventChanges(s, old, next), Revision: rev, Actor: author}
		}
		ruleChain, err := json.Marshal(append(slices.Clip(chain), r.keyname))
		if err != nil {
			return fmt.Errorf("record event: %w", err)
		}
		for _, kind := range []string{EventWebhook, EventPipeline} {
			if kind == EventWebhook && !r.webhook || kind == EventPipeline && !r.pipeline {
				continue
			}
			body.ID = uuid.NewString()
			text, err := json.Marshal(body)
			if err != nil {
				return fmt.Errorf("record event: %w", err)
			}
			if _, err := tx.exec(ctx, `INSERT INTO events(id, seq, rule, kind, classname, keyname, action, body, chain, next_at, created_at)
				VALUES(?, (SELECT coalesce(max(seq), 0) + 1 FROM events), ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				body.ID, r.keyname, kind, s.Keyname, state.Keyname, string(action), string(text), string(ruleChain),
				tx.db.Now().UnixMilli(), body.Time); err != nil {
				return fmt.Errorf("record event: %w", err)
			}
			tx.events.recorded++
		}
	}
	return nil
}

// eventChanges are the fields whose values differ between old and next (either nil),
// displayname and is_enabled as if fields (and keyname when renamed), never a secret-dataformat field.
// Only the schema's fields count: a value stored under a field since removed is not
// the schema's any more.
func eventChanges(s *model.Schema, old, next *Instance) map[string]eventChange {
	changes := map[string]eventChange{}
	pick := func(in *Instance, f func(*Instance) any) any {
		if in == nil {
			return nil
		}
		return f(in)
	}
	add := func(name string, o, n any) {
		if o == nil && n == nil {
			return
		}
		if o != nil && n != nil && model.SameJSONValue(o, n) {
			return
		}
		changes[name] = eventChange{Old: o, New: n}
	}
	if old != nil && next != nil {
		add("keyname", old.Keyname, next.Keyname) // a rename
	}
	add("displayname", pick(old, func(in *Instance) any { return in.Displayname }), pick(next, func(in *Instance) any { return in.Displayname }))
	add("is_enabled", pick(old, func(in *Instance) any { return in.IsEnabled }), pick(next, func(in *Instance) any { return in.IsEnabled }))
	for _, f := range s.Fields {
		if f.Dataformat == "secret" {
			continue
		}
		add(f.Keyname, pick(old, func(in *Instance) any { return in.Data[f.Keyname] }),
			pick(next, func(in *Instance) any { return in.Data[f.Keyname] }))
	}
	return changes
}

// eventsCommitted tells Options.OnEvents how many events the committed transaction
// recorded, and logs once the events a too long chain suppressed.
func (tx *Tx) eventsCommitted() {
	if tx.events.tooDeep > 0 {
		tx.db.log.Warn("event rule chain too deep", "max_depth", MaxEventDepth, "chain", tx.rev.Chain,
			"suppressed", tx.events.tooDeep)
	}
	if tx.events.recorded > 0 && tx.db.onEvents != nil {
		tx.db.onEvents(tx.events.recorded)
	}
}
