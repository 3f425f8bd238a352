package engine

import (
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/slot"
)

// noRecordsOf checks, after a step of each instance, that no definition
// or departure record of workflow wf is left.
func (r *departedRig) noRecordsOf(wf string) {
	r.t.Helper()
	r.step(0, true)
	r.step(1, true)
	defs, err := r.count.RegisterKeys(definedBucket, definedPrefix(wf))
	if err != nil {
		r.t.Fatal(err)
	}
	deps, err := r.count.RegisterKeys(departedBucket, "")
	if err != nil {
		r.t.Fatal(err)
	}
	if len(defs)+len(deps) > 0 {
		r.t.Errorf("records left once nothing of %s runs: definitions %q, departures %q", wf, defs, deps)
	}
}

// finishAll ends every running job of the service successfully.
func (p *poolService) finishAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ext := range p.live {
		delete(p.live, ext)
		p.done[ext] = true
	}
}

// TestRollingRestartKeepsTheDefinitionRecord: a rolling restart of two
// instances onto a configuration without workflow a. A (old
// configuration, owns a) has recorded a's definition and run its 09:00
// slot to its end. B restarts first, with the new configuration: its
// first step finds a's record with nothing of a running and removes it.
// A, still on the old configuration, submits a's 10:00 slot. Then A
// restarts with the new configuration: a's 10:00 job must be found
// (through a's definition record) and polled to its end, not left
// RUNNING for ever.
func TestRollingRestartKeepsTheDefinitionRecord(t *testing.T) {
	r := newDepartedRig(t)
	r.wdirs[1], _ = poolOfTwo(t) // B's copy of the directory
	r.insts = []*departedInst{r.open(0), r.open(1)}
	r.step(0, true) // WAITING → READY
	r.step(0, true) // a's 09:00 submitted, its definition recorded
	if got := r.status("a", r.start); got != slot.Running {
		t.Fatalf("a's 09:00 slot is %s, want RUNNING", got)
	}
	r.svc.finishAll()
	r.step(0, true)
	if got := r.status("a", r.start); got != slot.Success {
		t.Fatalf("a's 09:00 slot is %s after its job ended, want SUCCESS", got)
	}
	// B restarts with the new configuration.
	r.undeployA(r.wdirs[1])
	r.insts[1] = r.open(1)
	r.step(1, true)
	// A, on the old one, runs a's next slot.
	next := r.start.Add(time.Hour)
	r.now = next.Add(5 * time.Minute)
	r.step(0, true)
	r.step(0, true)
	if got := r.status("a", next); got != slot.Running {
		t.Fatalf("a's 10:00 slot is %s, want RUNNING", got)
	}
	// A restarts with the new configuration.
	r.undeployA(r.wdirs[0])
	r.insts[0] = r.open(0)
	r.step(0, true)
	r.step(1, true)
	r.svc.finishAll()
	r.step(0, true)
	if got := r.status("a", next); got != slot.Success {
		t.Errorf("a's 10:00 slot is %s after its job ended, want SUCCESS: submitted by A after B removed a's definition record, "+
			"it is unknown to A restarted without a (never polled, its pool place taken for ever)", got)
	}
	r.violations()
	r.noRecordsOf("a")
}

// TestRollingRestartWhileItRuns: as above, but a's 09:00 job still runs
// when B restarts with the configuration without a: B notes its
// departure (from a's definition record, which it then removes: the
// departure holds the definition), and A, which still has a in the same
// pool, ends that departure at its next step (a's own steps poll the
// slot). Then A restarts without a: a's job must still be found and
// polled to its end.
func TestRollingRestartWhileItRuns(t *testing.T) {
	r := newDepartedRig(t)
	r.wdirs[1], _ = poolOfTwo(t)
	r.insts = []*departedInst{r.open(0), r.open(1)}
	r.step(0, true)
	r.step(0, true) // a's 09:00 submitted, its definition recorded
	if got := r.status("a", r.start); got != slot.Running {
		t.Fatalf("a's 09:00 slot is %s, want RUNNING", got)
	}
	r.undeployA(r.wdirs[1])
	r.insts[1] = r.open(1)
	r.step(1, true) // B notes a's departure
	r.step(0, true) // A, with a in etl, ends it
	r.step(0, true)
	r.undeployA(r.wdirs[0])
	r.insts[0] = r.open(0)
	r.step(0, true)
	r.step(1, true)
	if got := r.status("b", r.start); got != slot.Ready {
		t.Errorf("b's slot is %s while a's job runs (pool limit 1), want READY", got)
	}
	r.svc.finishAll()
	r.step(0, true)
	if got := r.status("a", r.start); got != slot.Success {
		t.Errorf("a's 09:00 slot is %s after its job ended, want SUCCESS (found after A restarted without a)", got)
	}
	r.violations()
	r.noRecordsOf("a")
}

// TestRollingRestartWhileItRunsThenBChanges: as above, and after A ended
// the departure B noted (writing a's definition again), B's configuration
// changes once more (b's retries): B lists the definitions again and
// finds a's, whose departure it still remembers. Its record must not be
// removed with nothing in the store naming a's job: A, restarted without
// a, must still find it.
func TestRollingRestartWhileItRunsThenBChanges(t *testing.T) {
	r := newDepartedRig(t)
	r.wdirs[1], _ = poolOfTwo(t)
	r.insts = []*departedInst{r.open(0), r.open(1)}
	r.step(0, true)
	r.step(0, true) // a's 09:00 submitted, its definition recorded
	r.undeployA(r.wdirs[1])
	r.insts[1] = r.open(1)
	r.step(1, true) // B notes a's departure, removes a's definition record
	r.step(0, true) // A, with a in etl, writes it again and ends the departure
	b := fixture.Hourly("b")
	b.StartTime, b.Pool, b.MaxRetryCount = r.start, "etl", 2
	fixture.WriteProject(t, r.wdirs[1], "p", b)
	r.step(1, true) // B's configuration changed: the definitions listed again
	r.step(0, true)
	r.undeployA(r.wdirs[0])
	r.insts[0] = r.open(0)
	r.step(0, true)
	r.svc.finishAll()
	r.step(0, true)
	if got := r.status("a", r.start); got != slot.Success {
		t.Errorf("a's 09:00 slot is %s after its job ended, want SUCCESS (found after A restarted without a)", got)
	}
	r.violations()
	r.noRecordsOf("a")
}
