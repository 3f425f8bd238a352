package engine

// The outbox: the webhook deliveries of the events a step emits, kept in
// the store (register bucket outboxBucket, shared by the instances of a
// cluster) from before the step records the slot states they tell of
// until the sender reports each delivered or given up (EnableOutbox).
//
// A step writes one record per delivery (event × target), marked not yet
// recorded, all in one batch when the store offers it (registerBatcher),
// durable before its batched state write; after it, the records of the
// slots whose state could not be written are removed (no event), the
// others are handed to Options.OnEvent with their delivery ids
// (scheduler.Event.Deliveries). A record is marked recorded only when the
// sender releases its delivery (Released: it stays for later), not when
// the state is written: most deliveries are finished, and removed, within
// seconds, and a second write each would double the outbox's cost
// (BenchmarkFailureStep). A kill at any point leaves either no record
// (the state was not written either: the next step decides again) or a
// record: the first step after a start, one a minute after it
// (outboxRescan) and one that steps a workflow the last scan did not (a
// take-over) offer the records no delivery of this engine holds — those
// of the workflows it steps (Options.Owns), every one without Owns — each
// to its target as the configuration defines it now, or give it up if
// the target is gone (outbox_target.go). A
// record not marked recorded is sent only if the slot's stored state is
// the one the event tells of; otherwise the state write never happened
// (a kill between the two writes) and the record is removed — or, rarely,
// the slot was rerun or killed while the delivery was being retried and
// the server was killed then: that delivery is not sent. A delivery is
// sent at least once, always under the same delivery id; one the sender
// had begun may be sent again.
//
// Bounds: a record older than MaxAge, or beyond the MaxEntries newest, is
// removed, logged and counted (OnDrop) when the outbox is scanned; so is
// a record that is not one (not JSON, another shape: it can never be
// sent) the first time a scan reads it.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

const (
	// outboxBucket is the register bucket of the deliveries not finished.
	outboxBucket = "celos-outbox"
	// outboxRescan is how often the outbox is scanned for deliveries
	// that nothing holds (released, another instance's before).
	outboxRescan = time.Minute
	// DefaultOutboxMaxAge and DefaultOutboxMaxEntries bound the outbox
	// (OutboxOptions).
	DefaultOutboxMaxAge     = scheduler.Window
	DefaultOutboxMaxEntries = 10000
)

// ReservedBuckets are the register buckets the engine keeps its own
// records in: the API refuses to write them, and to read the records of
// outboxBucket, departedBucket and definedBucket (GetRegister).
var ReservedBuckets = []string{slaBucket, outboxBucket, departedBucket, definedBucket}

// OutboxOptions configure the outbox (EnableOutbox).
type OutboxOptions struct {
	// MaxAge: a delivery not finished after it is removed; default
	// DefaultOutboxMaxAge (the window, 7 days).
	MaxAge time.Duration
	// MaxEntries: beyond it, the oldest deliveries are removed; default
	// DefaultOutboxMaxEntries.
	MaxEntries int
	// OnDrop, if set, hears of each delivery the bounds removed (metrics).
	OnDrop func(event string)
	// Undeployed, with several instances (Options.Owns), reports whether
	// this instance sends the deliveries of workflow wf, which its
	// configuration does not deploy: the server names the live instance
	// that would hold wf's lease, so that during a rolling deploy an
	// instance without wf leaves alone the deliveries of the one that
	// steps it. nil: none does, they wait for the bounds. Without Owns
	// (one instance) this instance sends them.
	Undeployed func(wf string) bool
}

// outboxState is the engine's side of the outbox.
type outboxState struct {
	on   bool
	opts OutboxOptions
	mu   sync.Mutex
	// live are the deliveries handed to OnEvent and not yet finished or
	// released, by delivery id.
	live map[string]outboxEntry
	// scanned is the last scan's time (by Clock), seen the workflows
	// this engine stepped then; guarded by stepMu.
	scanned time.Time
	seen    map[string]bool
}

// outboxRecord is a delivery's register (readable by people on the state
// database; not through the API, since it names the target's URL).
type outboxRecord struct {
	Event      string                `json:"event"`
	Workflow   string                `json:"workflow"`
	Slot       time.Time             `json:"slot"`
	Status     slot.Status           `json:"status"`
	ExternalID string                `json:"externalId,omitempty"`
	RetryCount int                   `json:"retryCount"`
	At         time.Time             `json:"at"`
	Detail     string                `json:"detail,omitempty"`
	Target     workflow.Notification `json:"target"`
	// TargetIndex is the target's place in the workflow's notify list,
	// NotifyURLs the URLs of that list, when the record was written (nil
	// in a record of a version before them): how the target is found
	// again after a redeploy (outbox_target.go).
	TargetIndex int      `json:"targetIndex"`
	NotifyURLs  []string `json:"notifyURLs,omitempty"`
	// Notify is that whole list (nil in a record of a version before it,
	// or one that would be too long with it): how targets of one URL are
	// told apart (matchTarget).
	Notify   []workflow.Notification `json:"notify,omitempty"`
	Delivery string                  `json:"delivery"`
	Created  time.Time               `json:"created"`
	// Recorded: the slot state the event tells of is recorded (always
	// for an event not tied to a state write: an SLA miss).
	Recorded bool `json:"recorded"`
}

// outboxEntry is a delivery of a step's event: its key ("" not recorded).
type outboxEntry struct {
	key string
	rec outboxRecord
}

// EnableOutbox makes the engine keep the deliveries of its events in the
// store (see above); call it before the first step. The engine then
// implements the sender's Outbox (scheduler/notify): Finished, Released,
// Mine.
func (e *Engine) EnableOutbox(o OutboxOptions) {
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultOutboxMaxAge
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultOutboxMaxEntries
	}
	e.out.mu.Lock()
	defer e.out.mu.Unlock()
	e.out.on, e.out.opts, e.out.live = true, o, make(map[string]outboxEntry)
}

// Finished removes a delivery made or given up.
func (e *Engine) Finished(wf, delivery string) {
	e.out.mu.Lock()
	o, ok := e.out.live[delivery]
	e.out.mu.Unlock()
	if !ok {
		return
	}
	// The record goes before the delivery is forgotten: a scan in between
	// would find a record that nothing holds and hand it out again.
	if o.key != "" {
		if err := e.regs.DeleteRegister(outboxBucket, o.key); err != nil && !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("delivery finished but not removed from the outbox: it may be sent again after a restart",
				"workflow", wf, "delivery", delivery, "error", err)
		}
	}
	e.out.mu.Lock()
	delete(e.out.live, delivery)
	e.out.mu.Unlock()
}

// Released forgets the deliveries the sender let go of, marking their
// records recorded (their states are: they were emitted after the state
// write): the next scan offers them again. The records are written
// together, in one batch when the store offers it (registerBatcher: one
// pair of file-system syncs, or one statement, for all the deliveries a
// stop lets go of), one by one otherwise. A record no longer there is not
// written back: the workflow's new owner (the sender lets go of the
// deliveries of a workflow no longer this instance's) may have delivered
// it meanwhile, and the record written again was sent once more at its
// next scan.
func (e *Engine) Released(deliveries ...string) {
	e.out.mu.Lock()
	var mark []outboxEntry
	for _, id := range deliveries {
		o, ok := e.out.live[id]
		delete(e.out.live, id)
		if ok && o.key != "" && !o.rec.Recorded {
			mark = append(mark, o)
		}
	}
	e.out.mu.Unlock()
	keys := make([]string, 0, len(mark))
	raws := make(map[string]json.RawMessage, len(mark))
	for _, o := range mark {
		if _, err := e.regs.GetRegister(outboxBucket, o.key); errors.Is(err, store.ErrNotFound) {
			continue // finished by another instance
		}
		o.rec.Recorded = true
		raw, err := json.Marshal(o.rec)
		if err != nil { // (never: plain data)
			continue
		}
		keys = append(keys, o.key)
		raws[o.key] = raw
	}
	failed := e.putOutboxes(keys, raws)
	for _, o := range mark {
		if err := failed[o.key]; err != nil {
			e.log.Warn("outbox record not marked recorded: it is checked against its slot's state before it is sent again",
				"workflow", o.rec.Workflow, "delivery", o.rec.Delivery, "error", err)
		}
	}
}

// Mine reports whether this engine delivers the events of wf: it steps
// wf, or wf is not deployed and its deliveries are this instance's to
// send (sendsUndeployed).
func (e *Engine) Mine(wf string) bool {
	e.mu.RLock()
	c := e.cfg
	e.mu.RUnlock()
	if c != nil && c.workflows[wf] == nil {
		return e.sendsUndeployed(wf)
	}
	return e.owns(wf)
}

// sendsUndeployed reports whether this engine sends the deliveries of
// workflow wf, which its configuration does not deploy: always with one
// instance, per OutboxOptions.Undeployed with several.
func (e *Engine) sendsUndeployed(wf string) bool {
	if e.opts.Owns == nil {
		return true
	}
	e.out.mu.Lock()
	f := e.out.opts.Undeployed
	e.out.mu.Unlock()
	return f != nil && f(wf)
}

func newDeliveryID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// outboxKey is a delivery's key: the workflow's hash prefix (slaPrefix),
// the creation time in milliseconds and the delivery id.
func outboxKey(wf string, created time.Time, id string) string {
	return slaPrefix(wf) + strconv.FormatInt(created.UnixMilli(), 10) + "-" + id
}

// parseOutboxKey splits a key into the workflow's prefix, the creation
// time and the delivery id; ok is false for a key that is not one.
func parseOutboxKey(k string) (prefix string, created time.Time, id string, ok bool) {
	parts := strings.Split(k, "-")
	if len(parts) != 3 || len(parts[0]) != 24 || parts[2] == "" {
		return "", time.Time{}, "", false
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", time.Time{}, "", false
	}
	return parts[0] + "-", time.UnixMilli(ms).UTC(), parts[2], true
}

// prepareOutbox records the deliveries of the step's events before the
// step writes the slot states (apply), all in one write when the store
// offers it (registerBatcher: one transaction, or one pair of file-system
// syncs, instead of one synced write per delivery), durable before it
// returns. A delivery that cannot be recorded is sent as before, without
// a record (logged).
func (s *stepper) prepareOutbox() {
	e := s.e
	if !e.out.on || e.opts.OnEvent == nil || len(s.pendingEvents) == 0 {
		return
	}
	created := e.clock().UTC()
	e.mu.RLock()
	c := e.cfg // the step's (stepMu is held)
	e.mu.RUnlock()
	var wfs map[string]*workflow.Workflow
	if c != nil {
		wfs = c.workflows
	}
	type delivery struct {
		i, j int // pendingEvents[i], target j
		key  string
		rec  outboxRecord
	}
	var ds []delivery
	var keys []string // in the order of the deliveries, each once
	raws := make(map[string]json.RawMessage)
	for i := range s.pendingEvents {
		pe := &s.pendingEvents[i]
		pe.ev.Deliveries = make([]string, len(pe.ev.Targets))
		pe.out = make([]outboxEntry, len(pe.ev.Targets))
		places, urls := notifyPlaces(wfs[pe.ev.Workflow], pe.ev.Kind)
		if len(places) != len(pe.ev.Targets) {
			places, urls = nil, nil // (never: known by their URLs alone)
		}
		for j, t := range pe.ev.Targets {
			ev := pe.ev
			id := newDeliveryID()
			if ev.Kind == workflow.EventSLAMissed {
				id = slaDeliveryID(slot.ID{Workflow: ev.Workflow, Time: ev.Slot}, t.URL, sameURLBefore(ev.Targets, j))
			}
			rec := outboxRecord{Event: ev.Kind, Workflow: ev.Workflow, Slot: ev.Slot.UTC(), Status: ev.Status, ExternalID: ev.ExternalID,
				RetryCount: ev.RetryCount, At: ev.At.UTC(), Detail: ev.Detail, Target: t, Delivery: id,
				Created: created, Recorded: pe.slot.Time.IsZero(), NotifyURLs: urls}
			if places != nil {
				rec.TargetIndex, rec.Notify = places[j], wfs[ev.Workflow].Notify
			}
			key := outboxKey(ev.Workflow, created, rec.Delivery)
			raw, err := json.Marshal(rec)
			if err == nil && len(raw) > maxOutboxRecord && rec.Notify != nil { // a long list: its URLs alone
				rec.Notify = nil
				raw, err = json.Marshal(rec)
			}
			if err == nil && len(raw) > maxOutboxRecord { // (a service's detail of that length)
				err = fmt.Errorf("its record would be %d bytes, more than the outbox takes (%d)", len(raw), maxOutboxRecord)
			}
			if err != nil {
				e.log.Warn("notification not recorded in the outbox: sent, but lost if the server stops before it is delivered",
					"workflow", ev.Workflow, "event", ev.Kind, "error", err)
				continue
			}
			// (Two targets have one key only if a step sent one SLA
			// miss twice to one target: one record, the last.)
			if _, dup := raws[key]; !dup {
				keys = append(keys, key)
			}
			raws[key] = raw
			ds = append(ds, delivery{i: i, j: j, key: key, rec: rec})
		}
	}
	failed := e.putOutboxes(keys, raws)
	for _, d := range ds {
		if err := failed[d.key]; err != nil {
			if !errors.Is(err, errNoRegisters) {
				e.log.Warn("notification not recorded in the outbox: sent, but lost if the server stops before it is delivered",
					"workflow", d.rec.Workflow, "event", d.rec.Event, "error", err)
			}
			continue
		}
		pe := &s.pendingEvents[d.i]
		pe.out[d.j] = outboxEntry{key: d.key, rec: d.rec}
		pe.ev.Deliveries[d.j] = d.rec.Delivery
	}
}

// sameURLBefore counts the targets before targets[j] with its URL.
func sameURLBefore(targets []workflow.Notification, j int) int {
	n := 0
	for _, t := range targets[:j] {
		if t.URL == targets[j].URL {
			n++
		}
	}
	return n
}

// putOutboxes writes the records raws (keys: their keys) in one batch
// when the store offers it, and returns those not written.
func (e *Engine) putOutboxes(keys []string, raws map[string]json.RawMessage) map[string]error {
	if len(keys) == 0 {
		return nil
	}
	return putRegisters(e.regs, outboxBucket, raws)
}

// discardOutbox removes the records of the events whose slot state could
// not be written: they did not happen. The records go in one batch when
// the store offers it (a failed batched state write fails every slot of
// it), otherwise one by one.
func (e *Engine) discardOutbox(pes ...pendingEvent) {
	var recs []outboxEntry
	for _, pe := range pes {
		for _, o := range pe.out {
			if o.key != "" {
				recs = append(recs, o)
			}
		}
	}
	if len(recs) == 0 {
		return
	}
	keys := make([]string, len(recs))
	for i, o := range recs {
		keys[i] = o.key
	}
	failed := deleteRegisters(e.regs, outboxBucket, keys)
	for _, o := range recs {
		if err := failed[o.key]; err != nil && !errors.Is(err, store.ErrNotFound) {
			// The next scan finds it not recorded, and checks the slot.
			e.log.Warn("outbox record of an event that did not happen not removed", "workflow", o.rec.Workflow, "delivery", o.rec.Delivery, "error", err)
		}
	}
}

// commitOutbox holds the records of an event whose state is written as
// live (before OnEvent: the sender may finish at once); Released marks
// them recorded if they stay.
func (e *Engine) commitOutbox(pe pendingEvent) {
	e.out.mu.Lock()
	defer e.out.mu.Unlock()
	for _, o := range pe.out {
		if o.key != "" {
			e.out.live[o.rec.Delivery] = o
		}
	}
}

// outboxItem is a key of the outbox, parsed.
type outboxItem struct {
	key, prefix, id string
	created         time.Time
}

// offerOutbox hands to OnEvent the deliveries of the outbox that nothing
// holds, at the first step, every outboxRescan after it and at a step
// that steps a workflow the last scan did not (a take-over), and applies
// the bounds (stepMu is held). todo are the workflows the step steps.
func (e *Engine) offerOutbox(c *config, todo []string) {
	if !e.out.on || e.opts.OnEvent == nil {
		return
	}
	now := e.clock()
	// A workflow this engine no longer steps is forgotten: if it comes
	// back (handed back within a minute), that is a take-over too.
	if e.opts.Owns != nil {
		for wf := range e.out.seen {
			if !e.owns(wf) {
				delete(e.out.seen, wf)
			}
		}
	}
	due := e.out.scanned.IsZero() || now.Sub(e.out.scanned) >= outboxRescan || now.Before(e.out.scanned)
	for _, wf := range todo {
		due = due || !e.out.seen[wf]
	}
	if !due {
		return
	}
	e.out.scanned = now
	e.out.seen = make(map[string]bool, len(todo))
	for _, wf := range c.ids {
		if e.owns(wf) {
			e.out.seen[wf] = true
		}
	}
	keys, err := e.regs.RegisterKeys(outboxBucket, "")
	if err != nil {
		if !errors.Is(err, errNoRegisters) {
			e.log.Warn("outbox not read: its deliveries wait for the next scan", "error", err)
		}
		return
	}
	items := make([]outboxItem, 0, len(keys))
	for _, k := range keys {
		if p, created, id, ok := parseOutboxKey(k); ok {
			items = append(items, outboxItem{key: k, prefix: p, id: id, created: created})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].created.After(items[j].created) }) // newest first
	byPrefix := make(map[string]string, len(c.ids))
	for _, wf := range c.ids {
		byPrefix[slaPrefix(wf)] = wf
	}
	targets := &targetResolver{c: c}
	offers := make([]offered, 0, len(items))
	handing := make(map[string]bool)
	for n, it := range items {
		e.out.mu.Lock()
		_, live := e.out.live[it.id]
		e.out.mu.Unlock()
		if live || handing[it.id] {
			continue // (two records of one SLA miss's delivery: a kill between its two records)
		}
		wf, known := byPrefix[it.prefix]
		if known && !e.owns(wf) {
			continue // another instance's: it steps the workflow
		}
		switch {
		case now.Sub(it.created) > e.out.opts.MaxAge:
			e.dropOutbox(it, "older than the outbox keeps ("+e.out.opts.MaxAge.String()+")")
			continue
		case n >= e.out.opts.MaxEntries:
			e.dropOutbox(it, "the outbox is full ("+strconv.Itoa(e.out.opts.MaxEntries)+" deliveries)")
			continue
		}
		if o, ok := e.offer(it, targets, !known); ok {
			offers = append(offers, o)
			handing[it.id] = true
		}
	}
	e.handOut(offers)
}

// offered is a delivery of the outbox to hand out (offer): its record, as
// read and, if a redeploy changed its target, rebased, and its target.
type offered struct {
	key     string
	rec     outboxRecord
	rebased *outboxRecord
	target  workflow.Notification
}

// readOutbox reads the record of it. ok is false for a record gone
// (finished meanwhile) or not read now (left for the next scan, logged),
// and for one that is not an outbox record — not JSON, another shape, or
// without the workflow, event, target and delivery id its key names:
// such a record can never be sent, and bad says why (its content is not
// quoted).
func (e *Engine) readOutbox(it outboxItem) (rec outboxRecord, ok bool, bad string) {
	raw, err := e.regs.GetRegister(outboxBucket, it.key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return rec, false, "" // finished meanwhile
	case errors.Is(err, store.ErrCorrupt):
		return rec, false, err.Error()
	case err != nil:
		e.log.Warn("outbox record not read: left for the next scan", "key", it.key, "error", err)
		return rec, false, ""
	}
	if len(raw) > maxOutboxRecord {
		return rec, false, badRecord(rec, len(raw))
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, false, "not an outbox record: " + err.Error()
	}
	if rec.Workflow == "" || rec.Event == "" || rec.Target.URL == "" || rec.Delivery != it.id || slaPrefix(rec.Workflow) != it.prefix {
		return rec, false, "not an outbox record: its workflow, event, target or delivery id is missing or not its key's"
	}
	if bad := badRecord(rec, len(raw)); bad != "" {
		return rec, false, bad
	}
	return rec, true, ""
}

// offer returns the delivery of it to hand out, for its target as the
// configuration defines it now (outbox_target.go); ok is false for one
// not handed out now (removed, given up, left). Of a workflow the
// configuration does not deploy (undeployed), only if this instance sends
// its deliveries (sendsUndeployed: the record names the workflow).
func (e *Engine) offer(it outboxItem, targets *targetResolver, undeployed bool) (o offered, ok bool) {
	rec, ok, bad := e.readOutbox(it)
	if bad != "" {
		e.dropRecord(it, outboxRecord{}, bad)
	}
	if !ok || undeployed && !e.sendsUndeployed(rec.Workflow) {
		return o, false // (another instance's: it steps the workflow, or would)
	}
	if !rec.Recorded {
		st, found, err := e.db.Get(slot.ID{Workflow: rec.Workflow, Time: rec.Slot})
		if err != nil {
			e.log.Warn("outbox: slot state not read: the delivery waits for the next scan", "workflow", rec.Workflow, "delivery", rec.Delivery, "error", err)
			return o, false
		}
		if !found || st.Status != rec.Status || st.RetryCount != rec.RetryCount || st.ExternalID != rec.ExternalID {
			e.log.Info("outbox: delivery removed: the state it tells of was never recorded (a stop between the two writes)",
				"workflow", rec.Workflow, "event", rec.Event, "delivery", rec.Delivery)
			e.deleteOutbox(it.key)
			return o, false
		}
		// (Marked recorded if it is released again.)
	}
	target, rebased, gone := targets.target(rec)
	switch {
	case gone == errUnknownNow:
		e.log.Debug("notification left in the outbox", "reason", gone, "workflow", rec.Workflow, "delivery", rec.Delivery)
		return o, false
	case gone != "":
		e.dropRecord(it, rec, gone)
		return o, false
	}
	return offered{key: it.key, rec: rec, rebased: rebased, target: target}, true
}

// handOut hands the deliveries of a scan to OnEvent. First, the records
// of those whose target a redeploy changed are rewritten for the target
// and list as they are now (rebase), so that the next redeploy is
// followed from there — all in one batch when the store offers it (a
// redeploy that re-points a target rewrites every delivery pending for
// it), before the sender may finish one. A record not rewritten is
// logged; its delivery is sent all the same.
func (e *Engine) handOut(offers []offered) {
	var keys []string
	raws := make(map[string]json.RawMessage)
	for i := range offers {
		if r := offers[i].rebased; r != nil {
			raw, err := rebasedRecord(r)
			if err != nil {
				e.log.Warn("outbox record not brought up to the redeployed target: a later redeploy is followed from the target it was written for",
					"workflow", r.Workflow, "delivery", r.Delivery, "error", err)
				offers[i].rebased = nil
				continue
			}
			keys = append(keys, offers[i].key)
			raws[offers[i].key] = raw
		}
	}
	failed := e.putOutboxes(keys, raws)
	for _, o := range offers {
		rec := o.rec
		if o.rebased != nil {
			if err := failed[o.key]; err != nil {
				e.log.Warn("outbox record not brought up to the redeployed target: a later redeploy is followed from the target it was written for",
					"workflow", rec.Workflow, "delivery", rec.Delivery, "error", err)
			} else {
				rec = *o.rebased
			}
		}
		e.out.mu.Lock()
		e.out.live[rec.Delivery] = outboxEntry{key: o.key, rec: rec}
		e.out.mu.Unlock()
		e.log.Info("notification from the outbox offered again", "workflow", rec.Workflow, "event", rec.Event, "delivery", rec.Delivery,
			"created", rec.Created.Format(time.RFC3339))
		e.opts.OnEvent(scheduler.Event{Kind: rec.Event, Workflow: rec.Workflow, Slot: rec.Slot, Status: rec.Status, ExternalID: rec.ExternalID,
			RetryCount: rec.RetryCount, At: rec.At, Detail: rec.Detail, Targets: []workflow.Notification{o.target}, Deliveries: []string{rec.Delivery}})
	}
}

// rebasedRecord encodes rec, rebased: without its notify list if the
// list makes it too long (the list's URLs tell the places).
func rebasedRecord(rec *outboxRecord) (json.RawMessage, error) {
	raw, err := json.Marshal(rec)
	if err == nil && len(raw) > maxOutboxRecord && rec.Notify != nil {
		rec.Notify = nil
		raw, err = json.Marshal(rec)
	}
	if err == nil && len(raw) > maxOutboxRecord {
		err = fmt.Errorf("its record would be %d bytes, more than the outbox takes (%d)", len(raw), maxOutboxRecord)
	}
	return raw, err
}

// dropOutbox removes a delivery the bounds exclude, logged and counted.
func (e *Engine) dropOutbox(it outboxItem, why string) {
	rec, _, _ := e.readOutbox(it)
	e.dropRecord(it, rec, why)
}

// dropRecord removes the record of it (rec, as far as it was read),
// logged and counted.
func (e *Engine) dropRecord(it outboxItem, rec outboxRecord, why string) {
	e.deleteOutbox(it.key)
	event := rec.Event
	if event == "" {
		event = "unknown" // (unreadable)
	}
	e.log.Warn("notification dropped from the outbox", "reason", why, "workflow", rec.Workflow, "event", event,
		"delivery", it.id, "created", it.created.Format(time.RFC3339))
	if e.out.opts.OnDrop != nil {
		e.out.opts.OnDrop(event)
	}
}

func (e *Engine) deleteOutbox(key string) {
	if err := e.regs.DeleteRegister(outboxBucket, key); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("outbox record not removed", "key", key, "error", err)
	}
}
