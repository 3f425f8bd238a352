package engine

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// pooledHourly is an hourly command workflow from 2026-11-24T08:00Z in pool.
func pooledHourly(id, pool string) workflow.Workflow {
	w := fixture.Hourly(id)
	w.StartTime = ts("2026-11-24T08:00Z")
	w.Pool = pool
	return w
}

// reopen replaces the rig's engine by a new one on the same directories
// and service: a restart of the server.
func (r *poolRig) reopen() {
	r.t.Helper()
	e, err := New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: r.svc},
		Logger: discard, PoolsFile: r.pools})
	if err != nil {
		r.t.Fatal(err)
	}
	r.e = e
}

// TestUndeployedRunningSlotKeepsItsPoolPlace: pool "etl" of limit 1,
// a's 08:00 slot RUNNING, b's held. a is undeployed while its job runs:
// the job still occupies the cluster, so b stays held — also after a
// restart — and a's job is still polled: when it ends a's slot is
// recorded SUCCESS, and b runs at the next step. a deployed again runs
// its next slots, never 08:00 a second time.
func TestUndeployedRunningSlotKeepsItsPoolPlace(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z")) // a 08:00 RUNNING (a before b), b held
	if a, b := r.state("a", start).Status, r.state("b", start).Status; a != slot.Running || b != slot.Ready {
		t.Fatalf("a %s, b %s; want RUNNING, READY", a, b)
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl")) // a undeployed
	r.step(ts("2026-11-24T08:32Z"))
	if st := r.state("b", start); st.Status != slot.Ready {
		t.Fatalf("b is %s while undeployed a's job runs, want READY (held: pool of 1)", st.Status)
	}
	if rep := r.e.LastStep(); rep.Pools["etl"].Running != 1 {
		t.Errorf("step report: etl %+v, want 1 running (a's job)", rep.Pools["etl"])
	}
	r.reopen() // a restart: the new engine never loaded a
	r.step(ts("2026-11-24T08:33Z"))
	if st := r.state("b", start); st.Status != slot.Ready {
		t.Fatalf("b is %s after a restart while undeployed a's job runs, want READY (held)", st.Status)
	}
	r.svc.finish(slot.ID{Workflow: "a", Time: start}, true)
	r.step(ts("2026-11-24T08:34Z")) // a's end polled and recorded
	if st := r.state("a", start); st.Status != slot.Success {
		t.Fatalf("undeployed a's slot is %s after its job succeeded, want SUCCESS (polled until it ends)", st.Status)
	}
	r.step(ts("2026-11-24T08:35Z"))
	if st := r.state("b", start); st.Status != slot.Running {
		t.Fatalf("b is %s once a's job ended, want RUNNING", st.Status)
	}
	// Deployed again: 08:00 is done, 09:00 waits for b's place.
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	r.svc.finishAll(true)
	for m := 0; m < 4; m++ {
		r.step(ts("2026-11-24T09:30Z").Add(time.Duration(m) * time.Minute))
		r.svc.finishAll(true)
	}
	var got []string
	for _, id := range r.svc.submitted() {
		got = append(got, id.String())
	}
	want := []string{"a@2026-11-24T08:00:00.000Z", "b@2026-11-24T08:00:00.000Z", "a@2026-11-24T09:00:00.000Z", "b@2026-11-24T09:00:00.000Z"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("submissions (-want +got):\n%s", d)
	}
}

// TestUndeployedRunningSlotPolledWithoutPool: a workflow in no pool
// undeployed while its slot runs: the job is still polled and its end
// recorded (FAILURE once its retries are spent), nothing new is started
// for it, and its later slots get no state.
func TestUndeployedRunningSlotPolledWithoutPool(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, "", nil, pooledHourly("a", ""), pooledHourly("keep", ""))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	if st := r.state("a", start); st.Status != slot.Running {
		t.Fatalf("a is %s, want RUNNING", st.Status)
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("keep", ""))
	r.step(ts("2026-11-24T09:30Z"))
	r.svc.finish(slot.ID{Workflow: "a", Time: start}, false)
	r.step(ts("2026-11-24T09:31Z"))
	if st := r.state("a", start); st.Status != slot.Failure {
		t.Fatalf("undeployed a's slot is %s after its job failed, want FAILURE", st.Status)
	}
	for _, id := range r.svc.submitted() {
		if id.Workflow == "a" && !id.Time.Equal(start) {
			t.Errorf("submitted %s for undeployed a", id)
		}
	}
	if _, found, _ := r.db.Get(slot.ID{Workflow: "a", Time: ts("2026-11-24T09:00Z")}); found {
		t.Errorf("undeployed a's 09:00 slot got a state")
	}
	// Its record in the store is gone once the job ended.
	r.reopen()
	r.step(ts("2026-11-24T09:32Z"))
	if keys, err := r.e.RegisterKeys(context.Background(), departedBucket, ""); err != nil || len(keys) != 0 {
		t.Errorf("after a's job ended the store still records departed workflows: %q, %v", keys, err)
	}
}

// TestMovedRunningSlotCountsInBothPools: a's 08:00 slot runs in pool
// "etl" (limit 1) when a is moved to pool "reports" (limit 1). The job
// was admitted by etl and still runs: etl keeps counting it until it ends
// (b, of etl, stays held); a is now reports's, which counts its running
// job too (c, of reports, stays held). Once it ends both run. A pool
// removed from the pools file and put back counts the running slots of
// its workflows again.
func TestMovedRunningSlotCountsInBothPools(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	pools := `{"pools": {"etl": {"limit": 1}, "reports": {"limit": 1}}}`
	r := newPoolRig(t, pools, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"), pooledHourly("c", "reports"))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z")) // a and c RUNNING, b held
	c8 := slot.ID{Workflow: "c", Time: start}
	r.svc.finish(c8, true)
	r.step(ts("2026-11-24T08:32Z")) // c SUCCESS
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("a", "reports"), pooledHourly("b", "etl"), pooledHourly("c", "reports"))
	if err := r.e.Rerun(context.Background(), c8, ts("2026-11-24T08:33Z")); err != nil {
		t.Fatal(err)
	}
	for m := 33; m < 36; m++ {
		r.step(ts("2026-11-24T08:00Z").Add(time.Duration(m) * time.Minute))
	}
	if b, c := r.state("b", start).Status, r.state("c", start).Status; b != slot.Ready || c != slot.Ready {
		t.Fatalf("b %s, c %s while moved a's job runs; want READY, READY (both pools count it)", b, c)
	}
	// etl removed from the pools file, then put back: a's job counts again.
	if err := os.WriteFile(r.pools, []byte(`{"pools": {"reports": {"limit": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:36Z"))
	if err := os.WriteFile(r.pools, []byte(pools), 0o644); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:37Z"))
	if b := r.state("b", start).Status; b != slot.Ready {
		t.Fatalf("b is %s after etl came back while a's job runs; want READY", b)
	}
	r.svc.finish(slot.ID{Workflow: "a", Time: start}, true)
	r.step(ts("2026-11-24T08:38Z")) // a SUCCESS
	r.step(ts("2026-11-24T08:39Z"))
	if b, c := r.state("b", start).Status, r.state("c", start).Status; b != slot.Running || c != slot.Running {
		t.Fatalf("b %s, c %s after a's job ended; want RUNNING, RUNNING", b, c)
	}
}

// TestDepartedRecordsHostile: records in the departures' register bucket
// that are not the engine's — not JSON of a departure, without a
// workflow, or under another key than their workflow and pool's — are
// logged and left alone: they count in no pool and poll nothing.
func TestDepartedRecordsHostile(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, pooledHourly("b", "etl"))
	if err := r.db.Put(slot.State{ID: slot.ID{Workflow: "x", Time: start}, Status: slot.Running, ExternalID: "job-x"}); err != nil {
		t.Fatal(err)
	}
	// Its job has ended: a poll would record SUCCESS.
	r.svc.jobs["job-x"] = &fakeJob{id: slot.ID{Workflow: "x", Time: start}, status: external.Status{Success: true}}
	forged := `{"workflow": {"id": "x", "pool": "etl", "externalService": {"type": "command"}}, "pool": "etl", "slots": ["2026-11-24T08:00:00Z"]}`
	for key, v := range map[string]string{
		"notjson":                      `"just a string"`,
		"noworkflow":                   `{"pool": "etl", "slots": []}`,
		"wrongtype":                    `{"workflow": 3, "slots": "x"}`,
		departedKey("x", "other"):      forged, // under another pool's key
		"0123456789abcdef0123456789ab": forged,
	} {
		if err := r.db.(Registers).PutRegister(departedBucket, key, []byte(v)); err != nil { // as another instance or a hand would; the API refuses it
			t.Fatal(err)
		}
	}
	r.reopen()
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	if st := r.state("b", start); st.Status != slot.Running {
		t.Fatalf("b is %s, want RUNNING: no record that is not the engine's counts in its pool", st.Status)
	}
	if n := len(r.svc.submitted()); n != 1 {
		t.Errorf("%d submissions, want 1", n)
	}
	if st := r.state("x", start); st.Status != slot.Running {
		t.Errorf("x's slot is %s, want RUNNING as it was: polled on the word of a record that is not the engine's", st.Status)
	}
}

// TestRedeployedWhileRunning: a undeployed while its 08:00 slot runs and
// deployed again (same pool) before the job ends: the slot is not
// submitted a second time, its end is recorded once, the departure ends
// (its record is removed) and the pool counts a's job once (b, in no
// hurry, runs when it ends).
func TestRedeployedWhileRunning(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 2}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z")) // a and b RUNNING (limit 2)
	r.svc.finish(slot.ID{Workflow: "b", Time: start}, true)
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl")) // a undeployed
	r.step(ts("2026-11-24T08:32Z"))
	keys, err := r.e.RegisterKeys(context.Background(), departedBucket, "")
	if err != nil || len(keys) != 1 {
		t.Fatalf("departures recorded: %q, %v; want one (a's)", keys, err)
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	for m := 33; m < 36; m++ {
		r.step(start.Add(time.Duration(m) * time.Minute))
	}
	if st := r.state("a", start); st.Status != slot.Running {
		t.Fatalf("a's slot is %s, want RUNNING (its job runs)", st.Status)
	}
	if keys, err := r.e.RegisterKeys(context.Background(), departedBucket, ""); err != nil || len(keys) != 0 {
		t.Errorf("a deployed again in its pool: departures still recorded %q (%v)", keys, err)
	}
	if u := r.e.LastStep().Pools["etl"]; u.Running != 1 {
		t.Errorf("etl %+v, want a's job counted once", u)
	}
	r.svc.finishAll(true)
	r.step(ts("2026-11-24T08:40Z"))
	if st := r.state("a", start); st.Status != slot.Success {
		t.Fatalf("a's slot is %s after its job ended, want SUCCESS", st.Status)
	}
	n := 0
	for _, id := range r.svc.submitted() {
		if id.Workflow == "a" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("a's 08:00 submitted %d times, want once", n)
	}
}
