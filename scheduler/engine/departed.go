package engine

// Departed workflows: a workflow that leaves the configuration
// (undeployed, or its deployment replaced by one without it) or moves to
// another pool while slots of it are RUNNING leaves jobs that still run
// on the cluster. The engine keeps, for each, a departure: the
// workflow's last definition, the pool those slots were admitted to, and
// the slots. Until they end, those slots count in that pool (admitPools,
// and on a shared store its admission: store.PoolClaim.Slots), and the
// slots of a workflow no longer deployed are polled by a step of their
// own (drain) that records how their jobs end and starts nothing. The
// departures are kept in the store's registers (bucket departedBucket),
// so they outlive a restart and are seen by the other instances sharing
// a PostgreSQL database. A record is never rewritten: each write is a new
// key (departedKey, then a digest of the value), so that two instances
// noting the same departure at once each keep their record, and every
// reader merges the records of a workflow and pool; a writer removes the
// records its own merged one replaces, and the last one when the
// departure ends.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// departedBucket is the register bucket of the departures.
const departedBucket = "celos-departed"

// departure is the record of a workflow that left the configuration, or
// its pool, while slots of it were RUNNING (the value of its register).
type departure struct {
	// Workflow is its last definition, without what a drain does not
	// use (notification targets, SLA, run constraints): what its jobs
	// are polled with.
	Workflow *workflow.Workflow `json:"workflow"`
	// Pool is the pool its slots were admitted to ("" none).
	Pool string `json:"pool,omitempty"`
	// Slots are the slot times that were RUNNING when it left: the only
	// slots the departure counts and polls.
	Slots []time.Time `json:"slots"`
	// keys are the store's records of it this engine read or wrote, with
	// the digest of each as read: a record read again is not merged again
	// (a cluster lists them at every step), and a record of a key with a
	// digest (departedRecordKey) is not even read again: it never changes.
	keys map[string][sha256.Size]byte
}

// drainDefinition returns a copy of w without what a drain does not use
// and must not: notification targets, SLA and run constraints. It is
// applied to the definitions the engine records and to those it reads
// back, so that a record written by hand into the store (a file of the
// state directory, a row of the database) cannot make a drain post
// events anywhere.
func drainDefinition(w *workflow.Workflow) *workflow.Workflow {
	def := *w
	def.Notify, def.SLA, def.Constraints = nil, nil, nil
	return &def
}

// departedKey is the register key of workflow wf's departure from pool
// (a workflow id may be 255 bytes long and hold '.', a key neither).
func departedKey(wf, pool string) string {
	h := sha256.Sum256([]byte(wf + "\x00" + pool))
	return hex.EncodeToString(h[:16])
}

// departedRecordKey is the key of departure record v of base (its
// departedKey): base, '-' and a digest of v.
func departedRecordKey(base string, v []byte) string {
	h := sha256.Sum256(v)
	return base + "-" + hex.EncodeToString(h[:8])
}

// departedBase returns the departedKey a record key k belongs to ("": k
// is not a departure's key), and whether k carries a digest (a record
// of a celos before them has the departedKey alone, rewritten in place).
func departedBase(k string) (base string, digest bool) {
	switch {
	case len(k) == 32:
		return k, false
	case len(k) == 32+1+16 && k[32] == '-':
		return k[:32], true
	}
	return "", false
}

// noteDepartures records the departures of the workflows of the previous
// configuration old that c no longer has, or has in another pool, while
// slots of them are RUNNING (reload; stepMu is held).
func (e *Engine) noteDepartures(old, c *config) {
	e.defs.scan = true // (departed_defs.go)
	if old == nil {
		return
	}
	for _, id := range old.ids {
		w, nw := old.workflows[id], c.workflows[id]
		if nw != nil && (w.Pool == "" || nw.Pool == w.Pool) {
			continue // still here, in the same pool (or it was in none)
		}
		active, err := e.db.Active(id)
		if err != nil {
			e.log.Warn("departed workflow: its running slots could not be read", "workflow", id, "error", err)
			continue
		}
		var running []time.Time
		for _, st := range active {
			if st.Status == slot.Running {
				running = append(running, st.ID.Time)
			}
		}
		if len(running) == 0 {
			continue
		}
		e.addDeparture(departure{Workflow: drainDefinition(w), Pool: w.Pool, Slots: running}, true)
		e.log.Info("workflow left while slots of it run: they keep their pool's place and are polled until they end",
			"workflow", id, "pool", w.Pool, "running", len(running), "deployed", nw != nil)
	}
	e.departedRead = false // read the other instances' again
}

// addDeparture merges d into the engine's departures and, if write,
// records the result in the store; it reports whether the record was
// written (or, with a store that keeps no registers, need not be).
func (e *Engine) addDeparture(d departure, write bool) bool {
	k := departedKey(d.Workflow.ID, d.Pool)
	if cur := e.departed[k]; cur != nil {
		seen := make(map[int64]bool, len(cur.Slots))
		for _, t := range cur.Slots {
			seen[t.UnixMilli()] = true
		}
		for _, t := range d.Slots {
			if !seen[t.UnixMilli()] {
				cur.Slots = append(cur.Slots, t)
			}
		}
		sort.Slice(cur.Slots, func(i, j int) bool { return cur.Slots[i].Before(cur.Slots[j]) })
		d = *cur
	} else {
		d.Slots = uniqueTimes(d.Slots) // (a record written by hand may repeat one: counted once)
	}
	if d.keys == nil {
		d.keys = make(map[string][sha256.Size]byte)
	}
	e.departed[k] = &d
	if !write {
		return true
	}
	v, err := json.Marshal(d)
	rk := ""
	if err == nil {
		rk = departedRecordKey(k, v)
		err = e.regs.PutRegister(departedBucket, rk, v)
	}
	if err != nil {
		if !errors.Is(err, errNoRegisters) {
			e.log.Warn("departed workflow not recorded in the store: a restart forgets its running slots", "workflow", d.Workflow.ID, "error", err)
			return false
		}
		return true
	}
	// The records this one merges are removed (another instance's
	// written meanwhile, unknown here, stays: it is merged when read).
	cur := e.departed[k]
	for old := range cur.keys {
		if old == rk {
			continue
		}
		if err := e.regs.DeleteRegister(departedBucket, old); err != nil && !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("departed workflow: a record its new one replaces could not be removed; removed when the departure ends", "workflow", d.Workflow.ID, "error", err)
			continue
		}
		delete(cur.keys, old)
	}
	cur.keys[rk] = sha256.Sum256(v)
	return true
}

// uniqueTimes returns ts sorted, each slot time (to the millisecond, as
// slots are named) once.
func uniqueTimes(ts []time.Time) []time.Time {
	out := append([]time.Time(nil), ts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	n := 0
	for i, t := range out {
		if i > 0 && t.UnixMilli() == out[n-1].UnixMilli() {
			continue
		}
		out[n] = t
		n++
	}
	return out[:n]
}

// readDepartures reads the departures the store records: at the first
// step and after every change of the configuration (the engine before a
// restart may have recorded some), and, in a cluster (Options.Owns), at
// every step: another instance may record a departure after this one
// reloaded (the instances read the workflows directory at their own
// steps), and one that sees the slots only RUNNING later notes none
// itself.
func (e *Engine) readDepartures() {
	if e.departedRead && e.opts.Owns == nil {
		return
	}
	e.departedRead = true
	keys, err := e.regs.RegisterKeys(departedBucket, "")
	if err != nil {
		if !errors.Is(err, errNoRegisters) {
			e.departedRead = false // tried again at the next step, logged once
			if msg := err.Error(); msg != e.departedErr {
				e.departedErr = msg
				e.log.Warn("departed workflows: the store's records could not be read; tried again at every step", "error", err)
			}
		}
		return
	}
	e.departedErr = ""
	bad := make(map[string]bool)
	defer func() { e.departedBad = bad }()
	for _, k := range keys {
		base, digest := departedBase(k)
		cur := e.departed[base]
		if cur != nil && digest {
			if _, known := cur.keys[k]; known {
				continue // read before, and never rewritten
			}
		}
		v, err := e.regs.GetRegister(departedBucket, k)
		if errors.Is(err, store.ErrNotFound) {
			continue // drained meanwhile
		}
		sum := sha256.Sum256(v)
		if err == nil && cur != nil && cur.keys[k] == sum {
			continue // read before: its slots that still run are kept
		}
		var d departure
		if err == nil {
			err = json.Unmarshal(v, &d)
		}
		if err == nil && (d.Workflow == nil || store.CheckWorkflow(d.Workflow.ID) != nil || base == "" || departedKey(d.Workflow.ID, d.Pool) != base) {
			// (an id no store takes: its slots could never be read, and
			// the departure would hold its pool place for ever)
			err = errors.New("not a departure record")
		}
		if err != nil {
			if bad[k] = true; !e.departedBad[k] { // (a cluster reads them at every step)
				e.log.Warn("departed workflows: a record of the store is unreadable, left as it is", "bucket", departedBucket, "key", k, "error", err)
			}
			continue
		}
		d.Workflow = drainDefinition(d.Workflow) // (a record written by hand may name more)
		e.addDeparture(d, false)
		e.departed[base].keys[k] = sum
	}
}

// pruneDepartures keeps, of each departure, the slots that are RUNNING
// in the store now, and forgets (and removes from the store) the
// departures with none left, and those of a workflow c has again in the
// same pool: its own steps poll and count those slots — once its
// definition is recorded (keepDefinition), since the definition record a
// departure replaced is gone (stepMu is held).
func (e *Engine) pruneDepartures(c *config) {
	for k, d := range e.departed {
		id := d.Workflow.ID
		if w := c.workflows[id]; w == nil || w.Pool != d.Pool {
			kept := d.Slots[:0]
			for _, t := range d.Slots {
				st, found, err := e.db.Get(slot.ID{Workflow: id, Time: t})
				if err != nil || (found && st.Status == slot.Running) {
					kept = append(kept, t) // (unreadable: kept, to be safe)
				}
			}
			d.Slots = kept
			if len(kept) > 0 {
				continue
			}
		} else if !e.keepDefinition(w) {
			continue // the departure stays what tells of its slots; tried again
		}
		delete(e.departed, k)
		if c.workflows[id] == nil { // (its drain's problems: a job that could not be asked about)
			e.mu.Lock()
			for pk := range e.problems {
				if pk.wf == id {
					delete(e.problems, pk)
				}
			}
			e.mu.Unlock()
		}
		for rk := range d.keys {
			if err := e.regs.DeleteRegister(departedBucket, rk); err != nil && !errors.Is(err, errNoRegisters) && !errors.Is(err, store.ErrNotFound) {
				e.log.Warn("departed workflow: its record could not be removed", "workflow", id, "error", err)
			}
		}
		e.log.Info("departed workflow: none of its slots runs any more", "workflow", id, "pool", d.Pool)
	}
	gone := e.departedIDs(c)
	e.mu.Lock()
	e.gone = gone
	e.mu.Unlock()
}

// departedIDs returns the workflows of the departures that c does not
// have, sorted: those a drain steps.
func (e *Engine) departedIDs(c *config) []string {
	var out []string
	seen := make(map[string]bool)
	for _, d := range e.departed {
		if id := d.Workflow.ID; c.workflows[id] == nil && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// LeasedIDs returns the workflows an instance of a cluster holds leases
// for: the loaded workflows and those no longer deployed whose slots
// still run (their drain writes their state, under the lease).
func (e *Engine) LeasedIDs() []string {
	e.mu.RLock()
	gone := e.gone // (not under stepMu: a cluster asks while a step runs)
	e.mu.RUnlock()
	ids := e.WorkflowIDs()
	if len(gone) == 0 {
		return ids
	}
	ids = append(ids, gone...)
	sort.Strings(ids)
	return ids
}

// drain polls the RUNNING slots of the departed workflows c no longer
// has (that this instance owns, paused ones included: nobody can resume
// a workflow that is not deployed) and records how their jobs end, by
// Decide's rules: SUCCESS; on failure FAILURE, or WAITING for a retry
// that only a redeploy makes; READY when the job never started. Nothing
// is submitted: a departed workflow has no READY slot when its step
// begins. Its later slots are not enumerated.
func (s *stepper) drain(ctx context.Context, c *config) {
	e := s.e
	byWF := make(map[string]*departure)
	for _, d := range e.departed {
		id := d.Workflow.ID
		if c.workflows[id] != nil || !e.owns(id) {
			continue
		}
		if cur := byWF[id]; cur != nil {
			cur.Slots = append(cur.Slots, d.Slots...)
		} else {
			dd := *d
			dd.Slots = append([]time.Time(nil), d.Slots...)
			byWF[id] = &dd
		}
	}
	for _, id := range e.departedIDs(c) {
		d := byWF[id]
		if d == nil || ctx.Err() != nil {
			continue
		}
		sort.Slice(d.Slots, func(i, j int) bool { return d.Slots[i].Before(d.Slots[j]) })
		ws := &wfStep{id: id, w: d.Workflow, svc: e.opts.Services[d.Workflow.ExternalService.Type],
			start: windowStart(d.Workflow, s.now), markKey: "\x00departed"}
		for i, t := range d.Slots {
			if i > 0 && t.Equal(d.Slots[i-1]) {
				continue
			}
			st, found, err := e.db.Get(slot.ID{Workflow: id, Time: t})
			if err == nil && found && st.Status == slot.Running {
				ws.slots = append(ws.slots, st)
			}
		}
		if len(ws.slots) == 0 {
			continue
		}
		if err := s.workflow(ctx, ws); err != nil {
			e.log.Warn("departed workflow: its running slots were not polled", "workflow", id, "error", err)
		}
		e.mu.Lock()
		delete(e.done, id) // (record moved it; a redeploy starts afresh)
		e.mu.Unlock()
	}
}

// departedInPools returns, for each pool of pools, the RUNNING slots of
// the departures from it: slots of workflows that are no longer the
// pool's and still count in it (admitPools, store.PoolClaim.Slots).
func (e *Engine) departedInPools(poolsDefined func(string) bool) map[string][]slot.ID {
	var out map[string][]slot.ID
	for _, d := range e.departed {
		if d.Pool == "" || !poolsDefined(d.Pool) {
			continue
		}
		if out == nil {
			out = make(map[string][]slot.ID)
		}
		for _, t := range d.Slots {
			out[d.Pool] = append(out[d.Pool], slot.ID{Workflow: d.Workflow.ID, Time: t})
		}
	}
	return out
}
