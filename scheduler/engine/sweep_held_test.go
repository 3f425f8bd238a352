package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestPoolPlaceFreedByKillPauseAndUndeploy (pre-release sweep, held): a
// pool of 1, workflow a's slot RUNNING and b's READY, held. Pausing a
// keeps its job counted (it still runs); a kill of a's slot frees the
// place at the next step; a's RUNNING slot of a later hour, whose
// workflow is then undeployed, keeps its place (its job still runs on
// the cluster) and is still polled: b runs once a's job has ended. (Before,
// the undeployed slot was neither polled nor counted and the pool
// admitted b beside it: TestUndeployedRunningSlotKeepsItsPoolPlace.)
func TestPoolPlaceFreedByKillPauseAndUndeploy(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	mk := func(id string) workflow.Workflow {
		w := fixture.Hourly(id)
		w.StartTime = start
		w.Pool = "etl"
		return w
	}
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, mk("a"), mk("b"))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z")) // a 08:00 RUNNING (a before b), b held
	a8 := slot.ID{Workflow: "a", Time: start}
	if r.state("a", start).Status != slot.Running || r.state("b", start).Status != slot.Ready {
		t.Fatalf("a %s, b %s; want RUNNING, READY", r.state("a", start).Status, r.state("b", start).Status)
	}
	if err := r.e.SetPaused(context.Background(), "a", true); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:32Z"))
	if st := r.state("b", start); st.Status != slot.Ready {
		t.Fatalf("b is %s while paused a's job runs, want READY (held)", st.Status)
	}
	if err := r.e.Kill(context.Background(), a8); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:33Z"))
	if st := r.state("b", start); st.Status != slot.Running {
		t.Fatalf("b is %s after a's slot was killed, want RUNNING", st.Status)
	}
	// Undeploy a while a slot of it runs.
	if err := r.e.SetPaused(context.Background(), "a", false); err != nil {
		t.Fatal(err)
	}
	r.svc.finishAll(true)
	r.step(ts("2026-11-24T09:30Z")) // b 08:00 SUCCESS; a 09:00, b 09:00 READY
	r.step(ts("2026-11-24T09:31Z")) // a 09:00 RUNNING (a before b)
	if st := r.state("a", ts("2026-11-24T09:00Z")); st.Status != slot.Running {
		t.Fatalf("a 09:00 is %s, want RUNNING", st.Status)
	}
	fixture.WriteProject(t, r.wdir, "p", mk("b"))
	r.step(ts("2026-11-24T09:32Z"))
	if st := r.state("b", ts("2026-11-24T09:00Z")); st.Status != slot.Ready {
		t.Fatalf("b 09:00 is %s after a was undeployed while its job runs, want READY (held)", st.Status)
	}
	r.svc.finishAll(true)
	r.step(ts("2026-11-24T09:33Z")) // a 09:00 SUCCESS
	if st := r.state("a", ts("2026-11-24T09:00Z")); st.Status != slot.Success {
		t.Fatalf("undeployed a's 09:00 is %s after its job ended, want SUCCESS", st.Status)
	}
	r.step(ts("2026-11-24T09:34Z"))
	if st := r.state("b", ts("2026-11-24T09:00Z")); st.Status != slot.Running {
		t.Fatalf("b 09:00 is %s once undeployed a's job ended, want RUNNING", st.Status)
	}
}

// TestEventReplayedDoesNotRunASlotAgain (pre-release sweep, held): the
// register of an event trigger written again, removed and written again
// after its slot ran does not run the slot again; a register of a slot
// before the workflow's start or in the future runs nothing.
func TestEventReplayedDoesNotRunASlotAgain(t *testing.T) {
	w := fixture.Hourly("ev")
	w.StartTime = ts("2026-11-24T08:00Z")
	w.Trigger = workflow.Trigger{Type: workflow.TriggerEvent, Bucket: "ingest", Key: "k-${year}${month}${day}T${hour}"}
	r := newPoolRig(t, "", nil, w)
	put := func(key string) {
		t.Helper()
		if err := r.e.PutRegister(context.Background(), "ingest", key, json.RawMessage(`{"files": 24}`)); err != nil {
			t.Fatal(err)
		}
	}
	put("k-20261124T07") // before the start
	put("k-20261124T23") // in the future
	put("k-20261124T08")
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	r.svc.finishAll(true)
	r.step(ts("2026-11-24T08:32Z"))
	for i := 0; i < 3; i++ {
		put("k-20261124T08")
		if err := r.e.DeleteRegister(context.Background(), "ingest", "k-20261124T08"); err != nil {
			t.Fatal(err)
		}
		put("k-20261124T08")
		r.step(ts("2026-11-24T08:4" + itoa(i) + "Z"))
		r.svc.finishAll(true)
	}
	var got []string
	for _, id := range r.svc.submitted() {
		got = append(got, slot.FormatTime(id.Time))
	}
	if strings.Join(got, ",") != "2026-11-24T08:00:00.000Z" {
		t.Fatalf("submitted %v, want 08:00 once", got)
	}
	if _, err := os.Stat(filepath.Join(r.ddir, "state", "ev", "2026-11-24", "23:00:00.000Z")); err == nil {
		t.Errorf("a state was written for the future slot of the register")
	}
}
