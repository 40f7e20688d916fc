package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"dataservice/internal/netguard"
	"dataservice/store"
	"dataservice/store/model"
)

// OwnerEventRule is the owner type of the tasks an event rule's pipeline action
// submits (owner id: the rule's keyname).
const OwnerEventRule = "eventrule"

// DeliveryOptions tune a Deliverer. Tests inject the clock, the base delay and the
// jitter here; nothing of it is package state.
type DeliveryOptions struct {
	Logger *slog.Logger
	// Concurrency bounds the deliveries in progress at once (default 8), and PerRule
	// those of one rule (default 2): a slow receiver holds at most PerRule of them.
	Concurrency, PerRule int
	// Poll is how often an idle Deliverer looks for due events recorded by other
	// processes or falling due after a back-off (default 1s); Wake cuts it short.
	Poll time.Duration
	// BaseDelay is the first retry's delay (default 5s); each further one doubles it,
	// up to MaxDelay (default 1h).
	BaseDelay, MaxDelay time.Duration
	// Now is the clock of the signatures' timestamps (default: the database's).
	// Due times and delays are the database's clock, which the outbox compares.
	Now func() time.Time
	// ShutdownGrace is how long deliveries in progress may go on after Run's context
	// ends (default 10s).
	ShutdownGrace time.Duration
	// Jitter returns a random duration in [0, d) (default math/rand/v2).
	Jitter func(d time.Duration) time.Duration
	// OnDelivered is told each acknowledged event's time from its commit; OnRetried
	// each failed attempt that will be retried; OnDead each event that died.
	OnDelivered func(latency time.Duration)
	OnRetried   func()
	OnDead      func()
}

// Deliverer delivers the outbox's events: webhooks to their receivers and pipeline
// actions to the task queue. Every serving process runs one; the outbox's leases keep
// two of them (or two nodes) from delivering the same event at once.
type Deliverer struct {
	db     *store.DB
	runner *Runner
	o      DeliveryOptions
	log    *slog.Logger
	id     string
	claims atomic.Uint64
	client *webhookClient
	wake   chan struct{}

	mu    sync.Mutex
	total int           // deliveries in progress
	done  chan struct{} // told when a delivery ends
}

// NewDeliverer returns a Deliverer over db; pipeline actions are submitted to runner.
func NewDeliverer(db *store.DB, runner *Runner, o DeliveryOptions) *Deliverer {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.PerRule <= 0 {
		o.PerRule = 2
	}
	o.PerRule = min(o.PerRule, o.Concurrency)
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = 5 * time.Second
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = time.Hour
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = func() time.Time { return db.Now() }
	}
	if o.Jitter == nil {
		o.Jitter = func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d)
		}
	}
	d := &Deliverer{db: db, runner: runner, o: o, log: o.Logger, id: uuid.NewString(), wake: make(chan struct{}, 1),
		done: make(chan struct{}, 1)}
	d.client = newWebhookClient(d.allowList)
	return d
}

// Wake tells the Deliverer that events were recorded (store.Options.OnEvents), so they
// go out at once rather than at the next poll.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// allowList is WEBHOOK_ALLOW_PRIVATE as stored now (validated when it was set; an
// unreadable value allows nothing beyond the default).
func (d *Deliverer) allowList() *netguard.AllowList {
	a, err := netguard.Parse(d.db.ConfigValue(context.Background(), store.ConfigWebhookAllowPrivate))
	if err != nil {
		d.log.Error("webhook allow list", "error", err)
		return nil
	}
	return a
}

// timeout is WEBHOOK_TIMEOUT_SECONDS.
func (d *Deliverer) timeout(ctx context.Context) time.Duration {
	return time.Duration(d.db.ConfigInt(ctx, store.ConfigWebhookTimeout)) * time.Second
}

// Run delivers due events until ctx ends, then waits for the deliveries in progress:
// they get ShutdownGrace to finish, then are cut off unrecorded (their leases run out
// and the events are attempted again, by this process after a restart or by another
// node). It purges delivered events older than TASK_RETENTION_DAYS at start and daily.
func (d *Deliverer) Run(ctx context.Context) error {
	d.purge(ctx)
	purgeTick := time.NewTicker(24 * time.Hour)
	defer purgeTick.Stop()
	attempts, cutOff := context.WithCancel(context.WithoutCancel(ctx))
	defer cutOff()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(d.o.ShutdownGrace, cutOff) })
	defer stopGrace()
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		claimed := d.claim(ctx)
		for _, ev := range claimed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.deliver(attempts, ev)
			}()
		}
		if len(claimed) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-d.wake:
		case <-d.done:
		case <-purgeTick.C:
			d.purge(ctx)
		case <-time.After(d.o.Poll):
		}
	}
	return nil
}

// claim leases as many due events as there are free slots and reserves their slots.
// The outbox counts every rule's leased events, this process's and other nodes': a
// rule already holding PerRule leases gets no more until one ends.
func (d *Deliverer) claim(ctx context.Context) []*claimedEvent {
	d.mu.Lock()
	free := d.o.Concurrency - d.total
	d.mu.Unlock()
	if free <= 0 {
		return nil
	}
	owner := d.id + "#" + strconv.FormatUint(d.claims.Add(1), 10)
	// The lease outlasts an attempt (bounded by its time-out) and the recording of its
	// outcome; a process that dies mid-delivery leaves its events to others after it.
	lease := 2*d.timeout(ctx) + 10*time.Second
	evs, err := d.db.ClaimEvents(ctx, owner, lease, free, d.o.PerRule)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error("claim events", "error", err)
		}
		return nil
	}
	out := make([]*claimedEvent, 0, len(evs))
	d.mu.Lock()
	d.total += len(evs)
	d.mu.Unlock()
	for _, ev := range evs {
		out = append(out, &claimedEvent{Event: ev, owner: owner})
	}
	return out
}

// claimedEvent is an event held under the lease of one claim (owner).
type claimedEvent struct {
	*store.Event
	owner string
}

// finished frees ev's slot.
func (d *Deliverer) finished(ev *claimedEvent) {
	d.mu.Lock()
	d.total--
	d.mu.Unlock()
	select {
	case d.done <- struct{}{}:
	default:
	}
}

// outcome is how one attempt ended: delivered (task: the submitted task's handle),
// failed and to be retried, or failed for good (dead: retrying cannot help).
type outcome struct {
	ok     bool
	dead   bool
	status int
	err    string
	task   string
}

// deliver makes one attempt and records its outcome under the event's lease.
func (d *Deliverer) deliver(ctx context.Context, ev *claimedEvent) {
	defer d.finished(ev)
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("event delivery panicked", "event", ev.ID, "panic", fmt.Sprint(p))
		}
	}()
	out := d.attempt(ctx, ev.Event)
	if !out.ok && ctx.Err() != nil {
		// Cut off by shutdown: not the receiver's failure, and nothing is recorded.
		d.log.Info("event delivery interrupted by shutdown; it is attempted again when its lease ends", "event", ev.ID)
		return
	}
	ctx = context.WithoutCancel(ctx)
	now := d.db.Now()
	if out.ok {
		if err := d.db.AckEvent(ctx, ev.ID, ev.owner, out.task); err != nil {
			d.recordFailed("acknowledge event", ev, err)
			return
		}
		if d.o.OnDelivered != nil {
			if at, err := time.Parse(time.RFC3339Nano, ev.CreatedAt); err == nil {
				d.o.OnDelivered(max(0, now.Sub(at)))
			}
		}
		return
	}
	limit := d.db.ConfigInt(ctx, store.ConfigWebhookMaxAttempts)
	dead := out.dead || ev.Attempts+1 >= limit
	next := now.Add(d.backoff(ev.Attempts + 1))
	if err := d.db.FailEvent(ctx, ev.ID, ev.owner, out.status, out.err, next, dead); err != nil {
		d.recordFailed("record event failure", ev, err)
		return
	}
	if dead {
		d.log.Warn("event dead", "event", ev.ID, "rule", ev.Rule, "attempts", ev.Attempts+1, "error", out.err)
		if d.o.OnDead != nil {
			d.o.OnDead()
		}
		return
	}
	d.log.Info("event attempt failed; retrying", "event", ev.ID, "rule", ev.Rule, "attempt", ev.Attempts+1,
		"next_at", next.UTC().Format(time.RFC3339), "error", out.err)
	if d.o.OnRetried != nil {
		d.o.OnRetried()
	}
}

// recordFailed logs an outcome that could not be recorded. A lost lease (the attempt
// outlived its lease and another claim took the event) is expected now and then: the
// other claim's outcome is the one recorded.
func (d *Deliverer) recordFailed(msg string, ev *claimedEvent, err error) {
	if errors.Is(err, store.ErrLeaseLost) {
		d.log.Warn(msg, "event", ev.ID, "error", err)
		return
	}
	d.log.Error(msg, "event", ev.ID, "error", err)
}

// backoff is the delay before the attempt after the n-th (n >= 1): BaseDelay doubled
// n-1 times, at most MaxDelay, of which the upper half is random (jitter spreads the
// retries of events that failed together).
func (d *Deliverer) backoff(n int) time.Duration {
	delay := d.o.BaseDelay
	for i := 1; i < n && delay < d.o.MaxDelay; i++ {
		delay *= 2
	}
	delay = min(delay, d.o.MaxDelay)
	return delay - delay/2 + d.o.Jitter(delay/2)
}

// attempt checks that the event may still be delivered, as its rule stands now and
// with its author's permissions now, then delivers it.
func (d *Deliverer) attempt(ctx context.Context, ev *store.Event) outcome {
	internal := func(what string, err error) outcome {
		d.log.Error("event delivery", "event", ev.ID, "step", what, "error", err)
		return outcome{err: "internal error (" + what + ")"}
	}
	target, err := d.db.EventRuleTarget(ctx, ev.Rule)
	if store.IsNotFound(err) {
		return outcome{dead: true, err: fmt.Sprintf("event rule %s no longer exists", ev.Rule)}
	}
	if err != nil {
		if store.ErrorCode(err) == model.EInternal {
			return internal("read rule", err)
		}
		return outcome{dead: true, err: store.ErrorText(err)}
	}
	if !target.Enabled {
		return outcome{dead: true, err: fmt.Sprintf("event rule %s is disabled", ev.Rule)}
	}
	auth, err := d.db.AuthOf(ctx, target.Author, target.AuthorID)
	if err != nil {
		if store.ErrorCode(err) == model.EInternal {
			return internal("read author", err)
		}
		return outcome{dead: true, err: fmt.Sprintf("the rule's author %s: %s", target.Author, store.ErrorText(err))}
	}
	s, err := d.db.Schema(ctx, ev.Classname)
	if store.IsNotFound(err) {
		return outcome{dead: true, err: fmt.Sprintf("schema %s no longer exists", ev.Classname)}
	}
	if err != nil {
		return internal("read schema", err)
	}
	// The author must still be allowed what the rule's validation demanded of it.
	if need, ok := store.MayWatch(auth, s); !ok {
		return outcome{dead: true, err: fmt.Sprintf("the rule's author %s may no longer watch %s (needs %s)",
			target.Author, ev.Classname, need)}
	}
	switch ev.Kind {
	case store.EventWebhook:
		return d.postWebhook(ctx, ev, target)
	case store.EventPipeline:
		return d.submitPipeline(ctx, ev, target, auth)
	}
	return outcome{dead: true, err: fmt.Sprintf("unknown event kind %q", ev.Kind)}
}

// postWebhook sends the event's stored body to the rule's URL, within
// WEBHOOK_TIMEOUT_SECONDS.
func (d *Deliverer) postWebhook(ctx context.Context, ev *store.Event, target *store.EventTarget) outcome {
	if target.URL == "" {
		return outcome{dead: true, err: fmt.Sprintf("event rule %s has no webhook_url", ev.Rule)}
	}
	if len(target.Secret) == 0 {
		// Validation requires one; an unsigned request would be indistinguishable
		// from a forged one.
		return outcome{dead: true, err: fmt.Sprintf("event rule %s has no secret to sign with", ev.Rule)}
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout(ctx))
	defer cancel()
	status, err := d.client.post(ctx, target.URL, ev.ID, target.Secret, ev.Body, d.o.Now())
	if err != nil {
		return outcome{status: status, err: err.Error()}
	}
	return outcome{ok: true, status: status}
}

// submitPipeline queues the rule's pipeline over the one changed instance, as the
// rule's author. The task's handle is the event's id, so an attempt repeated after a
// crash between the submission and its acknowledgement finds the task it queued
// rather than queueing a second one.
func (d *Deliverer) submitPipeline(ctx context.Context, ev *store.Event, target *store.EventTarget, auth *model.Auth) outcome {
	if target.Pipeline == "" {
		return outcome{dead: true, err: fmt.Sprintf("event rule %s has no pipeline", ev.Rule)}
	}
	if _, err := d.runner.Get(ctx, ev.ID); err == nil {
		return outcome{ok: true, task: ev.ID}
	} else if !store.IsNotFound(err) {
		return outcome{err: "internal error (read task)"}
	}
	if ev.Action == string(model.ActionDelete) {
		return outcome{dead: true, err: "a pipeline cannot run on a deleted instance"}
	}
	keyname := ev.Keyname
	handle, err := d.runner.Submit(ctx, Params{Pipeline: target.Pipeline, Schemas: []string{ev.Classname},
		Keynames: []string{keyname}, Chain: ev.Chain, Auth: auth, OwnerType: OwnerEventRule, OwnerID: ev.Rule,
		Handle: ev.ID})
	if err != nil {
		msg := store.ErrorText(err)
		switch {
		case store.ErrorCode(err) == model.EInternal:
			d.log.Error("event delivery", "event", ev.ID, "step", "submit task", "error", err)
			return outcome{err: "internal error (submit task)"}
		case strings.HasPrefix(msg, "task queue is full"), store.ErrorCode(err) == model.EDiskFull:
			return outcome{err: msg}
		}
		return outcome{dead: true, err: msg}
	}
	return outcome{ok: true, task: handle}
}

// purge deletes delivered events older than TASK_RETENTION_DAYS.
func (d *Deliverer) purge(ctx context.Context) {
	days := d.db.ConfigInt(ctx, store.ConfigTaskRetentionDays)
	n, err := d.db.PurgeEvents(ctx, d.db.Now().UTC().AddDate(0, 0, -days))
	switch {
	case err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled):
		d.log.Error("purge events", "error", err)
	case n > 0:
		d.log.Info("purged delivered events", "count", n)
	}
}
