package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// regsOf is the registers of the rig's store.
func regsOf(r *poolRig) Registers { return r.db.(Registers) }

// definedKeys lists the definition records of the rig's store.
func definedKeys(t *testing.T, r *poolRig) []string {
	t.Helper()
	keys, err := regsOf(r).RegisterKeys(definedBucket, "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestUndeployedWhileStoppedKeepsItsPoolPlace: pool etl of limit 1, a's
// 08:00 slot RUNNING, b's held. The engine stops; a is undeployed; a new
// engine — which never loaded a — starts: b stays held while a's job
// runs, a's job is polled and, once it ends, a's slot is SUCCESS and b
// runs; a's definition record is gone then. (The engine-level twin of
// the server's TestUndeployedWhileNoServerRuns.)
func TestUndeployedWhileStoppedKeepsItsPoolPlace(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	if a, b := r.state("a", start).Status, r.state("b", start).Status; a != slot.Running || b != slot.Ready {
		t.Fatalf("a %s, b %s; want RUNNING, READY", a, b)
	}
	if keys := definedKeys(t, r); len(keys) != 1 || !strings.HasPrefix(keys[0], definedPrefix("a")) {
		t.Fatalf("definition records %q, want a's only (b submitted nothing)", keys)
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl")) // a undeployed while no engine runs
	r.reopen()
	for m := range 3 {
		r.step(ts("2026-11-24T08:32Z").Add(time.Duration(m) * time.Minute))
		if st := r.state("b", start); st.Status != slot.Ready {
			t.Fatalf("b is %s while a, undeployed while no engine ran, still runs in etl of 1; want READY", st.Status)
		}
	}
	if got := r.e.LeasedIDs(); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("LeasedIDs %q, want a (its job is polled) and b", got)
	}
	r.svc.finish(slot.ID{Workflow: "a", Time: start}, true)
	r.step(ts("2026-11-24T08:40Z"))
	if st := r.state("a", start); st.Status != slot.Success {
		t.Fatalf("a's slot is %s after its job succeeded, want SUCCESS (polled although no engine saw it leave)", st.Status)
	}
	r.step(ts("2026-11-24T08:41Z"))
	if st := r.state("b", start); st.Status != slot.Running {
		t.Fatalf("b is %s once a's job ended, want RUNNING", st.Status)
	}
	for _, k := range definedKeys(t, r) {
		if strings.HasPrefix(k, definedPrefix("a")) {
			t.Errorf("a's definition record %s is left after its departure ended", k)
		}
	}
}

// TestMovedWhileStoppedCountsInItsOldPool: a (pool etl of 1) RUNNING, b
// of etl held; while no engine runs a moves to pool reports. The new
// engine counts a's running slot in etl still (b held) until it ends.
func TestMovedWhileStoppedCountsInItsOldPool(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}, "reports": {"limit": 1}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("a", "reports"), pooledHourly("b", "etl"))
	r.reopen()
	r.step(ts("2026-11-24T08:32Z"))
	r.step(ts("2026-11-24T08:33Z"))
	if st := r.state("b", start); st.Status != slot.Ready {
		t.Fatalf("b is %s while a's job, admitted to etl before a moved, runs; want READY", st.Status)
	}
	r.svc.finish(slot.ID{Workflow: "a", Time: start}, true)
	r.step(ts("2026-11-24T08:34Z"))
	r.step(ts("2026-11-24T08:35Z"))
	if st := r.state("b", start); st.Status != slot.Running {
		t.Fatalf("b is %s once a's job ended, want RUNNING", st.Status)
	}
}

// countingRegs counts the writes of definition records and fails them
// while fail is set.
type countingRegs struct {
	Registers
	mu   sync.Mutex
	puts int
	fail error
}

func (c *countingRegs) PutRegister(bucket, key string, v json.RawMessage) error {
	if bucket == definedBucket {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.fail != nil {
			return c.fail
		}
		c.puts++
	}
	return c.Registers.PutRegister(bucket, key, v)
}

// TestDefinitionRecordedOncePerDefinition: a workflow's definition is
// written before its first submission, not again while it is unchanged
// (steps, a restart), once more when it changes (the older record
// removed), and its record removed when it leaves with nothing running.
func TestDefinitionRecordedOncePerDefinition(t *testing.T) {
	r := newPoolRig(t, "", nil, pooledHourly("a", ""))
	regs := &countingRegs{Registers: regsOf(r)}
	open := func() {
		e, err := New(Options{WorkflowsDir: r.wdir, Store: r.db, Registers: regs, Logger: discard,
			Services: map[string]external.Service{workflow.ServiceCommand: r.svc}})
		if err != nil {
			t.Fatal(err)
		}
		r.e = e
	}
	open()
	// Every hour's slot submitted and ended, a restart before the last.
	for h := 8; h < 12; h++ {
		if h == 11 {
			open()
		}
		for m := 30; m < 33; m++ {
			r.step(ts(fmt.Sprintf("2026-11-24T%02d:%02dZ", h, m)))
			r.svc.finishAll(true)
		}
	}
	if got := len(r.svc.submitted()); got != 4 {
		t.Fatalf("%d submissions, want 4", got)
	}
	if regs.puts != 1 {
		t.Errorf("definition written %d times for 4 submissions of one definition (a restart between), want once", regs.puts)
	}
	first := definedKeys(t, r)
	w := pooledHourly("a", "")
	w.ExternalService.Command = []string{"echo", "changed"}
	fixture.WriteProject(t, r.wdir, "p", w)
	r.step(ts("2026-11-24T12:30Z"))
	r.step(ts("2026-11-24T12:31Z"))
	if got := len(r.svc.submitted()); got != 5 {
		t.Fatalf("%d submissions, want 5", got)
	}
	second := definedKeys(t, r)
	if regs.puts != 2 || len(second) != 1 || cmp.Equal(first, second) {
		t.Errorf("after a change: %d writes, records %q (before %q); want 2 writes and one new record", regs.puts, second, first)
	}
	var d definition
	raw, _ := regsOf(r).GetRegister(definedBucket, second[0])
	if err := json.Unmarshal(raw, &d); err != nil || d.Workflow == nil || !cmp.Equal(d.Workflow.ExternalService.Command, []string{"echo", "changed"}) {
		t.Errorf("record %s: %s (%v), want the changed definition", second[0], raw, err)
	}
	r.svc.finishAll(true)
	r.step(ts("2026-11-24T12:32Z")) // 12:00 SUCCESS: nothing runs
	fixture.WriteProject(t, r.wdir, "p")
	r.step(ts("2026-11-24T12:33Z"))
	if keys := definedKeys(t, r); len(keys) != 0 {
		t.Errorf("records %q after a left with nothing running, want none", keys)
	}
}

// TestDefinitionNotRecordedHoldsTheSlot: when the definition cannot be
// recorded, the slot is not submitted (a server that starts without the
// workflow could not poll its job): it stays READY with a problem of op
// submit saying why, and is submitted once the store takes the record.
func TestDefinitionNotRecordedHoldsTheSlot(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, "", nil, pooledHourly("a", ""))
	regs := &countingRegs{Registers: regsOf(r), fail: errors.New("injected: disk full")}
	e, err := New(Options{WorkflowsDir: r.wdir, Store: r.db, Registers: regs, Logger: discard,
		Services: map[string]external.Service{workflow.ServiceCommand: r.svc}})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	for _, at := range []string{"2026-11-24T08:30Z", "2026-11-24T08:31Z"} {
		// The store refused a write: the step says so (POST /scheduler
		// answers 500), as when it refuses a submit intent.
		if err := r.e.Step(context.Background(), ts(at), nil); err != nil && !errors.Is(err, ErrPersist) {
			t.Fatalf("step at %s: %v", at, err)
		}
	}
	if st := r.state("a", start); st.Status != slot.Ready || len(r.svc.submitted()) != 0 {
		t.Fatalf("a is %s, %d submissions; want READY, none", st.Status, len(r.svc.submitted()))
	}
	var found bool
	for _, p := range r.e.Problems("a") {
		if p.Workflow == "a" && p.Op == "submit" && strings.Contains(p.Error, "record the workflow's definition") && strings.Contains(p.Error, "injected: disk full") {
			found = true
		}
	}
	if !found {
		t.Errorf("problems %+v, want a's submit problem naming the definition record and the error", r.e.Problems("a"))
	}
	regs.mu.Lock()
	regs.fail = nil
	regs.mu.Unlock()
	r.step(ts("2026-11-24T08:32Z"))
	if st := r.state("a", start); st.Status != slot.Running {
		t.Fatalf("a is %s once the record could be written, want RUNNING", st.Status)
	}
}

// TestDefinitionRecordsHostile: records of the bucket that are not
// definitions (not JSON, no workflow, a key of another workflow) are
// logged and left alone, count nowhere and poll nothing; the step goes
// on.
func TestDefinitionRecordsHostile(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, pooledHourly("b", "etl"))
	var logs bytes.Buffer
	var mu sync.Mutex
	r.e.log = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	gone, _ := json.Marshal(definition{Workflow: &workflow.Workflow{ID: "gone"}, Pool: "etl"})
	recs := map[string]string{
		"notadefinition":             "[1, 2]",
		"noworkflow":                 `{"pool": "etl"}`,
		definedPrefix("other") + "x": string(gone), // gone's record under another workflow's key
	}
	for k, v := range recs {
		if err := regsOf(r).PutRegister(definedBucket, k, json.RawMessage(v)); err != nil {
			t.Fatal(err)
		}
	}
	// gone has a RUNNING slot: a record under the wrong key must not
	// make it a departure.
	if err := r.db.Put(slot.State{ID: slot.ID{Workflow: "gone", Time: start}, Status: slot.Running, ExternalID: "x"}); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	if st := r.state("b", start); st.Status != slot.Running {
		t.Fatalf("b is %s, want RUNNING (no record here is a departure)", st.Status)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if n := strings.Count(out, "not a definition"); n != 3 {
		t.Errorf("%d warnings about records that are not definitions, want 3:\n%s", n, out)
	}
	for k := range recs {
		if _, err := regsOf(r).GetRegister(definedBucket, k); err != nil {
			t.Errorf("record %s: %v, want it left", k, err)
		}
	}
}

// TestKillDepartedSlot: a's job runs when a is undeployed (a departure,
// pool etl of 1, b held). Kill of a's slot kills the job with the
// definition the departure keeps and records the slot KILLED; the next
// step ends the departure and b runs. The same after a restart in which a
// was undeployed while no engine ran (the departure comes from its
// definition record). A slot of an undeployed workflow that is not
// running when it left is still refused as of an unknown workflow.
func TestKillDepartedSlot(t *testing.T) {
	for _, offline := range []bool{false, true} {
		t.Run(map[bool]string{false: "undeployed while running", true: "undeployed while stopped"}[offline], func(t *testing.T) {
			start := ts("2026-11-24T08:00Z")
			id := slot.ID{Workflow: "a", Time: start}
			r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
			r.step(ts("2026-11-24T08:30Z"))
			r.step(ts("2026-11-24T08:31Z"))
			ext := r.state("a", start).ExternalID
			fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl"))
			if offline {
				r.reopen()
			}
			r.step(ts("2026-11-24T08:32Z"))
			if st := r.state("b", start); st.Status != slot.Ready {
				t.Fatalf("b is %s while a's job runs, want READY", st.Status)
			}
			if err := r.e.Kill(context.Background(), slot.ID{Workflow: "a", Time: ts("2026-11-24T09:00Z")}); !errors.Is(err, slot.ErrUnknownWorkflow) {
				t.Errorf("kill of a slot of undeployed a that is no departure's: %v, want ErrUnknownWorkflow", err)
			}
			if err := r.e.Kill(context.Background(), id); err != nil {
				t.Fatalf("kill of undeployed a's running slot: %v", err)
			}
			if st := r.state("a", start); st.Status != slot.Killed || st.ExternalID != ext {
				t.Errorf("a's slot after the kill: %+v, want KILLED with external ID %s", st, ext)
			}
			r.svc.mu.Lock()
			kills := append([]string(nil), r.svc.kills...)
			r.svc.mu.Unlock()
			if !cmp.Equal(kills, []string{ext}) {
				t.Errorf("jobs killed on the service: %q, want a's %s", kills, ext)
			}
			if err := r.e.Kill(context.Background(), id); !errors.Is(err, slot.ErrIllegalTransition) {
				t.Errorf("second kill: %v, want ErrIllegalTransition (KILLED is final)", err)
			}
			r.step(ts("2026-11-24T08:33Z"))
			r.step(ts("2026-11-24T08:34Z"))
			if st := r.state("b", start); st.Status != slot.Running {
				t.Fatalf("b is %s after a's job was killed, want RUNNING (the pool freed)", st.Status)
			}
			if got := r.e.LeasedIDs(); !cmp.Equal(got, []string{"b"}) {
				t.Errorf("LeasedIDs %q, want b only (a's departure ended)", got)
			}
		})
	}
}
