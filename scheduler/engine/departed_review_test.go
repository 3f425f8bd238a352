package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestDepartedSlotEndedIsNotCountedAgain: an engine of a cluster reads
// the departures at every step. a, in pool etl, has its 08:00 and 09:00
// slots RUNNING when it moves to pools reports: both count in etl. 08:00
// ends, and is rerun (in reports now, which admits it): etl counts 09:00
// only. The store's record still names 08:00 (it is not rewritten when a
// slot ends); read again unchanged at the next steps, it must not bring
// 08:00 back into etl.
func TestDepartedSlotEndedIsNotCountedAgain(t *testing.T) {
	pools := `{"pools": {"etl": {"limit": 2}, "reports": {"limit": 3}}}`
	a := func(pool string) workflow.Workflow {
		w := pooledHourly("a", pool)
		w.SchedulingStrategy.Concurrency = 2
		return w
	}
	r := newPoolRig(t, pools, nil, a("etl"))
	var err error
	r.e, err = New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: r.svc},
		Logger: discard, PoolsFile: r.pools, Owns: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	at8, at9 := ts("2026-11-24T08:00Z"), ts("2026-11-24T09:00Z")
	now := ts("2026-11-24T09:30Z")
	step := func() StepReport {
		now = now.Add(time.Minute)
		return r.step(now)
	}
	step()
	step()
	if a8, a9 := r.state("a", at8).Status, r.state("a", at9).Status; a8 != slot.Running || a9 != slot.Running {
		t.Fatalf("a's slots %s, %s; want RUNNING, RUNNING", a8, a9)
	}
	fixture.WriteProject(t, r.wdir, "p", a("reports")) // moved
	if rep := step(); rep.Pools["etl"].Running != 2 {
		t.Fatalf("etl counts %d running slots after a moved, want 2 (a's)", rep.Pools["etl"].Running)
	}
	r.svc.finish(slot.ID{Workflow: "a", Time: at8}, true)
	step() // 08:00 SUCCESS
	if err := r.e.Rerun(context.Background(), slot.ID{Workflow: "a", Time: at8}, now); err != nil {
		t.Fatal(err)
	}
	step()
	step()
	if got := r.state("a", at8).Status; got != slot.Running {
		t.Fatalf("a's 08:00 rerun is %s, want RUNNING (admitted by reports)", got)
	}
	for range 3 {
		if rep := step(); rep.Pools["etl"].Running != 1 {
			t.Errorf("etl counts %d running slots, want 1 (a's 09:00, still a departure; 08:00 runs again in reports)", rep.Pools["etl"].Running)
		}
	}
}

// listHookRegs calls onList before each listing of a register bucket.
type listHookRegs struct {
	Registers
	onList func(bucket string)
}

func (r listHookRegs) RegisterKeys(bucket, prefix string) ([]string, error) {
	r.onList(bucket)
	return r.Registers.RegisterKeys(bucket, prefix)
}

// TestLeasedIDsKeepADepartingWorkflowDuringTheStep: an engine of a
// cluster offers the leases its loaded workflows and its departed ones
// (LeasedIDs, asked by the cluster's renewal while a step runs). From the
// moment a step's reload finds a's slot running and a gone, a is among
// them: at no point of the step does a renewal see it missing (it would
// release a's lease, and the step would not poll a's job).
func TestLeasedIDsKeepADepartingWorkflowDuringTheStep(t *testing.T) {
	r := newPoolRig(t, "", nil, pooledHourly("a", ""), pooledHourly("b", ""))
	var mu sync.Mutex
	var seen [][]string
	regs := listHookRegs{Registers: r.db.(Registers), onList: func(bucket string) {
		if bucket == departedBucket {
			mu.Lock()
			seen = append(seen, r.e.LeasedIDs())
			mu.Unlock()
		}
	}}
	var err error
	r.e, err = New(Options{WorkflowsDir: r.wdir, Store: r.db, Registers: regs, Services: map[string]external.Service{workflow.ServiceCommand: r.svc},
		Logger: discard, Owns: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	if got := r.state("a", ts("2026-11-24T08:00Z")).Status; got != slot.Running {
		t.Fatalf("a's slot is %s, want RUNNING", got)
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "")) // a undeployed
	mu.Lock()
	seen = nil
	mu.Unlock()
	r.step(ts("2026-11-24T08:32Z"))
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the step did not read the departures")
	}
	for _, ids := range seen {
		if d := cmp.Diff([]string{"a", "b"}, ids); d != "" {
			t.Errorf("LeasedIDs while the step reads the departures (-want +got):\n%s", d)
		}
	}
	if d := cmp.Diff([]string{"a", "b"}, r.e.LeasedIDs()); d != "" {
		t.Errorf("LeasedIDs after the step (-want +got):\n%s", d)
	}
}
