package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"

	"dataservice/rules"
	"dataservice/store/model"
)

// MaxEventDepth is the longest chain of event rules a write may follow: a write made
// by a pipeline that a chain of MaxEventDepth rules submitted (each rule's pipeline
// changing what the next one watches) records no event at all.
const MaxEventDepth = 3

// eventRule is an enabled event rule as the recording needs it.
type eventRule struct {
	keyname string
	// actions are the actions watched; empty: every action.
	actions map[string]bool
	// cond is the compiled condition (nil: none).
	cond     *rules.Condition
	webhook  bool
	pipeline bool
	// broken: the stored condition does not parse (written before its checks, or
	// by SQL outside the store): the rule fires on nothing, and its loading says why.
	broken bool
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
	// fill is what the cache takes once the transaction commits: the rules it read
	// at the generation it read them, when it changed no rule and no schema. Only a
	// committed generation keys the cache (a rolled-back transaction's may have been
	// raised by its own writes, and be taken again by another change).
	fill *ruleCacheFill
}

// ruleCacheFill is rules read at generation gen.
type ruleCacheFill struct {
	gen   int64
	rules eventRules
}

// watching returns the enabled rules that watch class cls, as the transaction sees
// them; nil when the transaction records no events (revisions off: migration and
// start-up writes; a dry run's private database). A write nobody watches costs a map
// lookup: the transaction reads the rules' generation once, at its first instance
// write, and the rules only when another transaction changed them.
func (tx *Tx) watching(ctx context.Context, cls string) ([]*eventRule, error) {
	if cls == EventRuleClass {
		// A changed rule takes effect from the next write of this transaction on,
		// and other transactions see it once this one commits (the generation bump).
		tx.touched = true
		tx.events.rules, tx.events.fill = nil, nil
	}
	if tx.rev.Off || tx.dry != nil {
		return nil, nil
	}
	if tx.events.rules == nil {
		byClass, err := tx.readEventRules(ctx)
		if err != nil {
			return nil, err
		}
		tx.events.rules = byClass
	}
	return tx.events.rules[cls], nil
}

// readEventRules reads the enabled rules: from the cache when its generation is the
// one the transaction sees and the transaction changed no rule, else from the
// transaction (and into the cache when it commits having changed nothing).
func (tx *Tx) readEventRules(ctx context.Context) (eventRules, error) {
	tx.events.reads++
	gen, err := tx.SchemaGeneration(ctx)
	if err != nil {
		return nil, err
	}
	c := &tx.db.ruleCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set && c.gen == gen && !tx.touched {
		return c.rules, nil
	}
	tx.events.reads++
	byClass, err := tx.loadEventRules(ctx)
	if err != nil {
		return nil, err
	}
	if !tx.touched {
		tx.events.fill = &ruleCacheFill{gen: gen, rules: byClass}
	}
	return byClass, nil
}

// loadEventRules reads every enabled event rule, by watched class.
func (tx *Tx) loadEventRules(ctx context.Context) (eventRules, error) {
	rows, err := tx.queryContext(ctx, "SELECT keyname, data FROM instances WHERE classname = ? AND is_enabled = 1 ORDER BY keyname",
		EventRuleClass)
	if err != nil {
		return nil, fmt.Errorf("read event rules: %w", err)
	}
	defer rows.Close()
	byClass := eventRules{}
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
		for _, a := range stringList(data["actions"]) {
			r.actions[a] = true
		}
		if text, _ := data["condition"].(string); text != "" {
			if r.cond, err = rules.ParseCondition(text); err != nil {
				r.broken = true
				tx.db.log.Warn("event rule condition does not parse: the rule fires on nothing", "rule", key, "error", err)
			}
		}
		url, _ := data["webhook_url"].(string)
		pipeline, _ := data["pipeline"].(string)
		r.webhook, r.pipeline = url != "", pipeline != ""
		for _, cls := range stringList(data["schemas"]) {
			if !slices.Contains(byClass[cls], r) {
				byClass[cls] = append(byClass[cls], r)
			}
		}
	}
	return byClass, rows.Err()
}

// writeChange writes the revision row of one change of an instance (old: before, nil on
// create; next: after, nil on delete) and records the events it fires, in the same
// transaction: what did not commit is never announced.
func (tx *Tx) writeChange(ctx context.Context, s *model.Schema, action model.Action, old, next *Instance, before, after string) error {
	tx.noteCachedClass(s.Keyname)
	watchers, err := tx.watching(ctx, s.Keyname)
	if err != nil {
		return err
	}
	key := ""
	if next != nil {
		key = next.Keyname
	} else if old != nil {
		key = old.Keyname
	}
	rev, err := tx.revisionRow(ctx, s.Keyname, key, action, before, after, deltaChange(action, old, next), len(watchers) > 0)
	if err != nil || len(watchers) == 0 {
		return err
	}
	return tx.recordEvents(ctx, s, action, old, next, watchers, rev)
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

// recordEvents records one event per kind (webhook, pipeline) of every rule among
// watchers that fires on the change: it watches the action, is not in the
// transaction's chain (which is shorter than MaxEventDepth), and its condition holds.
func (tx *Tx) recordEvents(ctx context.Context, s *model.Schema, action model.Action, old, next *Instance, watchers []*eventRule, rev *int64) error {
	state := next
	if state == nil {
		state = old
	}
	var oldState, newState map[string]any // the conditions' states, made at the first condition
	chain := tx.rev.Chain
	var body *eventBody
	for _, r := range watchers {
		if !r.watches(action) || slices.Contains(chain, r.keyname) || r.broken {
			continue
		}
		if len(chain) >= MaxEventDepth {
			tx.events.tooDeep++
			continue
		}
		// The condition reads the new state (the old for a delete); changed compares both.
		if r.cond != nil {
			if oldState == nil && newState == nil {
				oldState, newState = conditionState(old), conditionState(next)
			}
			if !r.cond.Match(newState, oldState) {
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
			if _, err := tx.exec(ctx, insertEvent(tx.db.dia),
				body.ID, r.keyname, kind, s.Keyname, state.Keyname, state.ID, string(action), string(text), string(ruleChain),
				tx.db.Now().UnixMilli(), body.Time); err != nil {
				return fmt.Errorf("record event: %w", err)
			}
			tx.events.recorded++
		}
	}
	return nil
}

// insertEvent is the statement recording an event. Its seq is above every event's
// and above the highest a purge deleted (RegEventsSeq): every write transaction holds
// the writer lock, so no other takes the same.
func insertEvent(d *dialect) string {
	return `INSERT INTO events(id, seq, rule, kind, classname, keyname, instance_id, action, body, chain, next_at, created_at)
		VALUES(?, (SELECT ` + d.greatest("coalesce((SELECT max(seq) FROM events), 0)",
		"coalesce((SELECT CAST(value AS BIGINT) FROM registry WHERE key = '"+RegEventsSeq+"'), 0)") +
		` + 1), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
}

// conditionState is what a condition reads of in (nil: no state): its fields, and
// keyname, displayname and is_enabled.
func conditionState(in *Instance) map[string]any {
	if in == nil {
		return nil
	}
	m := make(map[string]any, len(in.Data)+3)
	for k, v := range in.Data {
		m[k] = v
	}
	m["keyname"], m["displayname"], m["is_enabled"] = in.Keyname, in.Displayname, in.IsEnabled
	return m
}

// eventChanges are the fields whose values differ between old and next (either nil),
// displayname and is_enabled as if fields (and keyname when renamed), never a field
// of dataformat secret. Only the schema's fields count: a value stored under a field
// since removed is not the schema's any more.
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

// eventsMark is the transaction's event counts at a savepoint.
type eventsMark struct{ recorded, tooDeep int }

// markEvents returns the event counts to restore if the savepoint about to be taken
// is rolled back to.
func (tx *Tx) markEvents() eventsMark {
	return eventsMark{recorded: tx.events.recorded, tooDeep: tx.events.tooDeep}
}

// rollbackEvents restores the event counts of m after a rollback to its savepoint:
// the rows recorded since are gone, so neither OnEvents nor the log counts them.
func (tx *Tx) rollbackEvents(m eventsMark) {
	tx.events.recorded, tx.events.tooDeep = m.recorded, m.tooDeep
}

// eventsCommitted fills the rule cache with the rules the committed transaction read,
// tells Options.OnEvents how many events it recorded, and logs once the events a too
// long chain suppressed.
func (tx *Tx) eventsCommitted() {
	if f := tx.events.fill; f != nil {
		c := &tx.db.ruleCache
		c.mu.Lock()
		if !c.set || c.gen <= f.gen {
			c.set, c.gen, c.rules = true, f.gen, f.rules
		}
		c.mu.Unlock()
		tx.events.fill = nil
	}
	if tx.events.tooDeep > 0 {
		tx.db.log.Warn("event rule chain too deep", "max_depth", MaxEventDepth, "chain", tx.rev.Chain,
			"suppressed", tx.events.tooDeep)
	}
	if tx.events.recorded > 0 && tx.db.onEvents != nil {
		tx.db.onEvents(tx.events.recorded)
	}
}
