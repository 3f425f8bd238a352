package engine

// Definitions kept for a departure that no engine saw: a workflow
// undeployed (or moved to another pool) while no server runs, or while
// the server is stopped or killed between the change of the workflows
// directory and its next step. noteDepartures needs the workflow's
// previous definition, which such a server never held; so, before a
// step submits a slot of a workflow, the engine records the workflow's
// definition (as a departure keeps it) and pool in the store, once per
// definition: register bucket definedBucket, one record per workflow and
// definition. A step that submits again under the same definition writes
// nothing (a map lookup) — but in a cluster (Options.Owns), where it is
// written again, in the step's one batch: an instance whose configuration
// lacks the workflow (a rolling restart onto a new one) removes its record
// when nothing of it runs, and the instance that still has it would
// otherwise submit its next slots with no record naming them. When the configuration changes (the first step
// included), the engine lists the bucket: a record of a workflow the
// configuration lacks, or has in another pool, whose slots are RUNNING
// becomes a departure (departed.go), so that those slots keep their
// pool's place and, undeployed, are polled until they end; the records
// of workflows that left with nothing running are removed.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// definedBucket is the register bucket of the definitions recorded before
// submission.
const definedBucket = "celos-defined"

// definition is the value of a record of definedBucket.
type definition struct {
	// Workflow is the definition without what a drain does not use (as
	// a departure's).
	Workflow *workflow.Workflow `json:"workflow"`
	// Pool is its pool ("" none).
	Pool string `json:"pool,omitempty"`
}

// definedState is the engine's knowledge of definedBucket. Guarded by
// stepMu.
type definedState struct {
	// scan: the bucket is to be listed at the next step (the
	// configuration changed, or the last listing failed).
	scan bool
	// scanErr is the last error of a listing, logged once.
	scanErr string
	// recorded is, per workflow, the key of its record that holds its
	// definition of the configuration; others the keys of its older
	// records, removed once the current one is written.
	recorded map[string]string
	others   map[string][]string
	// keys caches the key and value of each definition of the
	// configuration (its pointers do not change while it is in effect).
	keys map[*workflow.Workflow]defined
}

// defined is a definition's record: its key and value.
type defined struct {
	key string
	val json.RawMessage
}

// definedPrefix is the part of the record keys of workflow wf that names
// it (a workflow id may be 255 bytes long and hold '.', a key neither).
func definedPrefix(wf string) string {
	h := sha256.Sum256([]byte(wf))
	return hex.EncodeToString(h[:16]) + "-"
}

// definedOf returns the record of definition w (cached while w is in the
// configuration).
func (e *Engine) definedOf(w *workflow.Workflow) (defined, error) {
	if d, ok := e.defs.keys[w]; ok {
		return d, nil
	}
	v, err := json.Marshal(definition{Workflow: drainDefinition(w), Pool: w.Pool})
	if err != nil {
		return defined{}, fmt.Errorf("encode the definition of workflow %s: %w", w.ID, err)
	}
	h := sha256.Sum256(v)
	d := defined{key: definedPrefix(w.ID) + hex.EncodeToString(h[:8]), val: v}
	if e.defs.keys == nil {
		e.defs.keys = make(map[*workflow.Workflow]defined)
	}
	e.defs.keys[w] = d
	return d, nil
}

// recordDefinitions records, before the slots of todo are submitted, the
// definitions of their workflows that the store does not hold yet (in a
// cluster, all of them: see above), in one batch, and returns todo without the slots of the workflows whose record
// could not be written: they stay READY (a problem of op "submit") until
// it can, since a job submitted without it could be lost to a server that
// starts without the workflow. A store that keeps no registers records
// nothing and holds nothing.
func (s *stepper) recordDefinitions(todo []pendingSubmit, intents map[slot.ID]store.Intent) []pendingSubmit {
	e := s.e
	kv := make(map[string]json.RawMessage)
	keyOf := make(map[string]string) // workflow → key written
	failed := make(map[string]error) // workflow → why not
	for _, p := range todo {
		id := p.w.ID
		if _, ok := keyOf[id]; ok || failed[id] != nil {
			continue
		}
		d, err := e.definedOf(p.w)
		if err != nil {
			failed[id] = err
			continue
		}
		if e.defs.recorded[id] == d.key && e.opts.Owns == nil {
			continue // (in a cluster, another instance may have removed it: written again)
		}
		kv[d.key], keyOf[id] = d.val, d.key
	}
	if len(kv) > 0 {
		refused := putRegisters(e.regs, definedBucket, kv)
		for id, k := range keyOf {
			err := refused[k]
			if errors.Is(err, errNoRegisters) {
				continue
			}
			if err != nil {
				failed[id] = fmt.Errorf("record the workflow's definition (what a server that starts without the workflow polls its jobs with): %w", err)
				s.persistFailed(err)
				continue
			}
			e.definedWritten(id, k)
		}
	}
	if len(failed) == 0 {
		return todo
	}
	out := todo[:0]
	for _, p := range todo {
		if err := failed[p.w.ID]; err != nil {
			delete(intents, p.st.ID)
			s.fail(p.st.ID, "submit", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// definedWritten notes that workflow id's record is key, and removes its
// older records.
func (e *Engine) definedWritten(id, key string) {
	old := e.defs.others[id]
	if r := e.defs.recorded[id]; r != "" && r != key {
		old = append(old, r)
	}
	if e.defs.recorded == nil {
		e.defs.recorded = make(map[string]string)
	}
	e.defs.recorded[id] = key
	delete(e.defs.others, id)
	for _, k := range old {
		if err := e.regs.DeleteRegister(definedBucket, k); err != nil && !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("an older definition record of a workflow could not be removed; removed when the configuration changes", "workflow", id, "key", k, "error", err)
		}
	}
}

// keepDefinition records w's definition unless it is recorded already,
// for a workflow deployed again in the pool it departed from while its
// slots may still run: the departure ends (the workflow's own steps poll
// and count the slots), and the definition record it replaced was
// removed, so without this a server that starts after w is undeployed
// again, while no server runs, would not know those slots. It reports
// false if the store refused the record (stepMu is held).
func (e *Engine) keepDefinition(w *workflow.Workflow) bool {
	d, err := e.definedOf(w)
	if err == nil && e.defs.recorded[w.ID] == d.key && e.opts.Owns == nil {
		return true // (in a cluster, the instance that noted the departure removed it)
	}
	if err == nil {
		err = e.regs.PutRegister(definedBucket, d.key, d.val)
	}
	switch {
	case errors.Is(err, errNoRegisters):
		return true
	case err != nil:
		e.log.Warn("the definition of a workflow deployed again while its slots run could not be recorded; its departure is kept until it is", "workflow", w.ID, "error", err)
		return false
	}
	e.definedWritten(w.ID, d.key)
	return true
}

// scanDefinitions lists the definition records when the configuration c
// is new (or the last listing failed): the records of workflows c lacks,
// or has in another pool, whose slots are RUNNING become departures; those
// of workflows c lacks are removed then (the departure holds the
// definition), or at once when nothing of theirs runs. It runs before
// the departures are read and pruned, so that the first step of a server
// counts such slots in their pools before it admits anything (stepMu is
// held).
func (e *Engine) scanDefinitions(c *config) {
	if !e.defs.scan {
		return
	}
	keys, err := e.regs.RegisterKeys(definedBucket, "")
	if errors.Is(err, errNoRegisters) {
		e.defs.scan = false
		return
	}
	if err != nil {
		if msg := err.Error(); msg != e.defs.scanErr {
			e.defs.scanErr = msg
			e.log.Warn("definition records could not be listed: workflows that left while no server ran are looked for again at every step", "error", err)
		}
		return
	}
	e.defs.scan, e.defs.scanErr = false, ""
	byPrefix := make(map[string]string, len(c.ids))
	for _, id := range c.ids {
		byPrefix[definedPrefix(id)] = id
	}
	e.defs.recorded = make(map[string]string)
	e.defs.others = make(map[string][]string)
	e.defs.keys = nil // (the old configuration's pointers)
	for _, k := range keys {
		if i := strings.IndexByte(k, '-'); i > 0 {
			if id, ok := byPrefix[k[:i+1]]; ok {
				if d, err := e.definedOf(c.workflows[id]); err == nil && d.key == k {
					e.defs.recorded[id] = k
					continue
				}
			}
		}
		if !e.scanDefinition(c, k) {
			e.defs.scan = true // tried again at the next step
		}
	}
}

// scanDefinition looks at record k, which is not the definition of a
// workflow of c (see scanDefinitions), and reports whether it was dealt
// with (false: the store failed; tried again).
func (e *Engine) scanDefinition(c *config, k string) bool {
	v, err := e.regs.GetRegister(definedBucket, k)
	if errors.Is(err, store.ErrNotFound) {
		return true // removed meanwhile
	}
	if err != nil {
		e.log.Warn("a definition record could not be read", "key", k, "error", err)
		return false
	}
	var d definition
	if err := json.Unmarshal(v, &d); err != nil || d.Workflow == nil || store.CheckWorkflow(d.Workflow.ID) != nil ||
		!strings.HasPrefix(k, definedPrefix(d.Workflow.ID)) {
		e.log.Warn("a record of the definitions bucket is not a definition, left as it is", "bucket", definedBucket, "key", k)
		return true
	}
	id := d.Workflow.ID
	d.Workflow = drainDefinition(d.Workflow) // (a record written by hand may name more)
	w := c.workflows[id]
	if w != nil && (d.Pool == "" || w.Pool == d.Pool) {
		// Still here, in the same pool: an older definition, removed
		// when the current one is written.
		e.defs.others[id] = append(e.defs.others[id], k)
		return true
	}
	active, err := e.db.Active(id)
	if err != nil {
		e.log.Warn("workflow that left while no server saw it: its running slots could not be read", "workflow", id, "error", err)
		return false
	}
	var running []time.Time
	for _, st := range active {
		if st.Status == slot.Running {
			running = append(running, st.ID.Time)
		}
	}
	// In a cluster the departure is written even if this engine knows it:
	// the instance that has the workflow in that pool again may have ended
	// it, removing its records, since (keepDefinition).
	if len(running) > 0 && (e.opts.Owns != nil || !e.departureHas(departedKey(id, d.Pool), running)) {
		if !e.addDeparture(departure{Workflow: d.Workflow, Pool: d.Pool, Slots: running}, true) {
			return false // the record stays: it is what tells of them
		}
		e.log.Info("workflow that left while no server saw it has running slots: they keep their pool's place and are polled until they end",
			"workflow", id, "pool", d.Pool, "running", len(running), "deployed", w != nil)
	}
	if w != nil {
		e.defs.others[id] = append(e.defs.others[id], k) // moved: removed when its definition is written
		return true
	}
	if err := e.regs.DeleteRegister(definedBucket, k); err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("the definition record of a workflow that left could not be removed", "workflow", id, "error", err)
		return false
	}
	return true
}

// departureHas reports whether the departure of key k holds every slot of
// ts (noted already, by the reload that saw the workflow leave).
func (e *Engine) departureHas(k string, ts []time.Time) bool {
	cur := e.departed[k]
	if cur == nil {
		return false
	}
	have := make(map[int64]bool, len(cur.Slots))
	for _, t := range cur.Slots {
		have[t.UnixMilli()] = true
	}
	for _, t := range ts {
		if !have[t.UnixMilli()] {
			return false
		}
	}
	return true
}
