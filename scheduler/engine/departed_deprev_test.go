package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/google/go-cmp/cmp"
)

// reopenWithEvents is reopen with the rig's OnEvent: a restart of a
// server that sends the events it is handed.
func (r *poolRig) reopenWithEvents() {
	r.t.Helper()
	e, err := New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: r.svc},
		Logger: discard, PoolsFile: r.pools, OnEvent: func(ev scheduler.Event) {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.e = e
}

// TestHostileRecordsPostNowhere: a's 08:00 slot RUNNING; the engine
// stops, a is undeployed, and a record written by hand into the state
// directory — a definition (celos-defined) or a departure
// (celos-departed) of a — names webhook targets, an SLA and run
// constraints that the engine's own records never hold. a's job then
// fails: the departure records it FAILURE, and hands no event to
// anyone (no webhook is posted where the hostile record says).
func TestHostileRecordsPostNowhere(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	for _, bucket := range []string{definedBucket, departedBucket} {
		t.Run(bucket, func(t *testing.T) {
			r := newPoolRig(t, "", nil, pooledHourly("a", ""), pooledHourly("b", ""))
			r.step(ts("2026-11-24T08:30Z"))
			r.step(ts("2026-11-24T08:31Z"))
			id := slot.ID{Workflow: "a", Time: start}
			if st := r.state("a", start); st.Status != slot.Running {
				t.Fatalf("a's slot is %s, want RUNNING", st.Status)
			}
			regs := regsOf(r)
			keys, err := regs.RegisterKeys(definedBucket, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys { // (only the hostile record tells of a)
				if err := regs.DeleteRegister(definedBucket, k); err != nil {
					t.Fatal(err)
				}
			}
			w := pooledHourly("a", "")
			w.Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://attacker.invalid/hook",
				Events: workflow.Events}}
			w.SLA = &workflow.SLA{SuccessWithinSeconds: 60}
			var v []byte
			var key string
			if bucket == definedBucket {
				v, err = json.Marshal(definition{Workflow: &w})
				key = definedPrefix("a") + "0123456789abcdef"
			} else {
				v, err = json.Marshal(departure{Workflow: &w, Slots: []time.Time{start}})
				key = departedRecordKey(departedKey("a", ""), v)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := regs.PutRegister(bucket, key, v); err != nil {
				t.Fatal(err)
			}
			fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "")) // a undeployed while no engine runs
			r.reopenWithEvents()
			r.step(ts("2026-11-24T08:40Z"))
			r.svc.finish(id, false)
			r.step(ts("2026-11-24T10:00Z"))
			r.step(ts("2026-11-24T10:01Z"))
			if st := r.state("a", start); st.Status != slot.Failure {
				t.Fatalf("a's slot is %s after its job failed, want FAILURE (polled by its departure)", st.Status)
			}
			for _, ev := range r.takeEvents() {
				if ev.Workflow == "a" {
					t.Errorf("event %s of departed a handed out to %v: targets a hand-written record named", ev.Kind, ev.Targets)
				}
			}
		})
	}
}

// TestRecordsBoundedUnderChurn: twenty hours of redeploys of a — moved
// between pools, renamed, with another definition, undeployed — some
// while its jobs run, some while no engine runs (a restart), b deployed
// throughout. Once everything is undeployed but b and every job has
// ended, no slot is RUNNING, no departure record is left, and the only
// definition record is b's: neither bucket grows with the changes.
func TestRecordsBoundedUnderChurn(t *testing.T) {
	pools := `{"pools": {"etl": {"limit": 3}, "rep": {"limit": 3}}}`
	r := newPoolRig(t, pools, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	hour := ts("2026-11-24T08:00Z")
	ids := map[string]bool{"a": true, "b": true}
	for i := range 20 {
		a := pooledHourly("a", "etl")
		switch i % 5 {
		case 1:
			a.Pool = "rep"
		case 2:
			a.ID = fmt.Sprintf("a-%d", i)
			a.StartTime = hour
		case 3:
			a.MaxRetryCount = i
		}
		ids[a.ID] = true
		if i%5 == 4 {
			fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl"))
		} else {
			fixture.WriteProject(t, r.wdir, "p", a, pooledHourly("b", "etl"))
		}
		if i%2 == 0 {
			r.reopen()
		}
		r.step(hour.Add(30 * time.Minute))
		r.step(hour.Add(31 * time.Minute))
		if i%3 == 0 {
			r.svc.finishAll(true)
		}
		hour = hour.Add(time.Hour)
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl"))
	r.reopen()
	for m := range 3 {
		r.svc.finishAll(true)
		r.step(hour.Add(time.Duration(m) * time.Minute))
	}
	for id := range ids {
		active, err := r.db.Active(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range active {
			if st.Status == slot.Running {
				t.Errorf("%s is still RUNNING after every job ended", st.ID)
			}
		}
	}
	if keys, err := regsOf(r).RegisterKeys(departedBucket, ""); err != nil || len(keys) != 0 {
		t.Errorf("departure records left once nothing runs: %q (%v)", keys, err)
	}
	for _, k := range definedKeys(t, r) {
		if !strings.HasPrefix(k, definedPrefix("b")) {
			t.Errorf("definition record %s left of a workflow no longer deployed", k)
		}
	}
	if keys := definedKeys(t, r); len(keys) != 1 {
		t.Errorf("definition records %q, want b's one", keys)
	}
}

// TestRedeployedWhileRunningThenUndeployedWhileStopped: pool etl of 1,
// a's 08:00 slot RUNNING, b's held. a is undeployed (its departure noted,
// its definition record removed: the departure holds the definition) and
// deployed again in the same pool while its job still runs (the
// departure ends: a's own steps poll and count the slot). The engine
// stops; a is undeployed; a new engine starts. a's job must still be
// known: b held while it runs, a's slot polled to SUCCESS.
func TestRedeployedWhileRunningThenUndeployedWhileStopped(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
			r.step(ts("2026-11-24T08:30Z"))
			r.step(ts("2026-11-24T08:31Z"))
			if a, b := r.state("a", start).Status, r.state("b", start).Status; a != slot.Running || b != slot.Ready {
				t.Fatalf("a %s, b %s; want RUNNING, READY", a, b)
			}
			fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl")) // a undeployed
			if restart {
				r.reopen()
			}
			r.step(ts("2026-11-24T08:32Z"))
			fixture.WriteProject(t, r.wdir, "p", pooledHourly("a", "etl"), pooledHourly("b", "etl")) // and back
			if restart {
				r.reopen()
			}
			r.step(ts("2026-11-24T08:33Z"))
			fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl")) // undeployed while no engine runs
			r.reopen()
			for m := range 3 {
				r.step(ts("2026-11-24T08:34Z").Add(time.Duration(m) * time.Minute))
				if st := r.state("b", start); st.Status != slot.Ready {
					t.Fatalf("b is %s while a's job runs in etl of 1 (a undeployed while no engine ran); want READY", st.Status)
				}
			}
			r.svc.finish(slot.ID{Workflow: "a", Time: start}, true)
			r.step(ts("2026-11-24T08:40Z"))
			if st := r.state("a", start); st.Status != slot.Success {
				t.Errorf("a's slot is %s after its job succeeded, want SUCCESS", st.Status)
			}
		})
	}
}

// TestKillRefusesWhatAHostileDepartureNames: a's 08:00 slot RUNNING, a
// undeployed (a genuine departure). Records written by hand into the
// bucket name x (never deployed) at 08:00 — with an externalID field,
// which no departure has — and a at 09:00 (never run). /kill of either
// is refused, and no job is killed; a's 08:00 job is killed.
func TestKillRefusesWhatAHostileDepartureNames(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, "", nil, pooledHourly("a", ""), pooledHourly("b", ""))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	ext := r.state("a", start).ExternalID
	for _, h := range []struct{ wf, at string }{{"x", "2026-11-24T08:00Z"}, {"a", "2026-11-24T09:00Z"}} {
		w := pooledHourly(h.wf, "")
		v, err := json.Marshal(map[string]any{"workflow": &w, "slots": []time.Time{ts(h.at)}, "externalID": ext})
		if err != nil {
			t.Fatal(err)
		}
		if err := regsOf(r).PutRegister(departedBucket, departedRecordKey(departedKey(h.wf, ""), v), v); err != nil {
			t.Fatal(err)
		}
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", ""))
	r.reopen()
	r.step(ts("2026-11-24T09:30Z"))
	for _, id := range []slot.ID{{Workflow: "x", Time: start}, {Workflow: "a", Time: ts("2026-11-24T09:00Z")}} {
		if err := r.e.Kill(context.Background(), id); err == nil {
			t.Errorf("kill %s, named only by a hand-written departure record, succeeded; want refused", id)
		}
	}
	if r.svc.kills != nil {
		t.Fatalf("jobs killed %q through hand-written records, want none", r.svc.kills)
	}
	if err := r.e.Kill(context.Background(), slot.ID{Workflow: "a", Time: start}); err != nil {
		t.Fatalf("kill of a's running departed slot: %v", err)
	}
	if d := cmp.Diff([]string{ext}, r.svc.kills); d != "" {
		t.Errorf("jobs killed (-want +got):\n%s", d)
	}
}

// TestHostileRecordsOfBadWorkflowIDs: records written by hand whose
// workflow id no store accepts ("a/b": every read of its slots fails).
// A departure record of it, from pool etl (limit 1), must not hold the
// pool's place for ever — b runs — and a definition record of it is
// logged once, not looked at again and logged at every step.
func TestHostileRecordsOfBadWorkflowIDs(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, pooledHourly("b", "etl"))
	w := pooledHourly("a/b", "etl")
	dep, err := json.Marshal(departure{Workflow: &w, Pool: "etl", Slots: []time.Time{start}})
	if err != nil {
		t.Fatal(err)
	}
	def, err := json.Marshal(definition{Workflow: &w, Pool: "etl"})
	if err != nil {
		t.Fatal(err)
	}
	if err := regsOf(r).PutRegister(departedBucket, departedRecordKey(departedKey(w.ID, "etl"), dep), dep); err != nil {
		t.Fatal(err)
	}
	if err := regsOf(r).PutRegister(definedBucket, definedPrefix(w.ID)+"0123456789abcdef", def); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	e, err := New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: r.svc},
		Logger: slog.New(slog.NewTextHandler(&out, nil)), PoolsFile: r.pools})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	for m := range 4 {
		r.step(ts("2026-11-24T08:30Z").Add(time.Duration(m) * time.Minute))
	}
	if st := r.state("b", start); st.Status != slot.Running {
		t.Errorf("b is %s in etl of 1, where nothing runs but what a hand-written record of workflow %q names; want RUNNING", st.Status, w.ID)
	}
	if n := strings.Count(out.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings in 4 steps, want 2: each record of %q once:\n%s", n, w.ID, out.String())
	}
}

// TestRedefinedWhileRunningThenUndeployedWhileStopped: a's 08:00 job
// runs under one definition; a is deployed again under the same id with
// another (more retries; in the same pool or another), hot and across a
// restart; the
// engine stops, a is undeployed, a new engine starts: a's job is found
// (the older definition's record is kept until the new one is written),
// counted in etl, where it was admitted, and polled to its end.
func TestRedefinedWhileRunningThenUndeployedWhileStopped(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	for _, c := range []struct {
		restart bool
		pool    string
	}{{false, "etl"}, {true, "etl"}, {false, "rep"}, {true, "rep"}} {
		restart := c.restart
		t.Run(fmt.Sprintf("restart=%v,pool=%s", restart, c.pool), func(t *testing.T) {
			r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}, "rep": {"limit": 1}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
			r.step(ts("2026-11-24T08:30Z"))
			r.step(ts("2026-11-24T08:31Z"))
			a := pooledHourly("a", c.pool)
			a.MaxRetryCount = 3
			fixture.WriteProject(t, r.wdir, "p", a, pooledHourly("b", "etl"))
			if restart {
				r.reopen()
			}
			r.step(ts("2026-11-24T08:32Z"))
			fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl"))
			r.reopen()
			for m := range 3 {
				r.step(ts("2026-11-24T08:33Z").Add(time.Duration(m) * time.Minute))
				if st := r.state("b", start); st.Status != slot.Ready {
					t.Fatalf("b is %s while a's job, admitted to etl, runs; want READY", st.Status)
				}
			}
			r.svc.finish(slot.ID{Workflow: "a", Time: start}, true)
			r.step(ts("2026-11-24T08:40Z"))
			if st := r.state("a", start); st.Status != slot.Success {
				t.Errorf("a's slot is %s after its job succeeded, want SUCCESS", st.Status)
			}
			r.step(ts("2026-11-24T08:41Z"))
			if st := r.state("b", start); st.Status != slot.Running {
				t.Errorf("b is %s once a's job ended, want RUNNING", st.Status)
			}
		})
	}
}

// TestHostileDepartureDuplicateSlots: pool etl of 2; a's 08:00 job runs,
// a is undeployed while no engine runs, and a departure record written
// by hand names that slot three times. The slot takes one place: b's
// 09:00 slot runs beside it.
func TestHostileDepartureDuplicateSlots(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 2}}}`, nil, pooledHourly("a", "etl"), pooledHourly("b", "etl"))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	r.svc.finish(slot.ID{Workflow: "b", Time: start}, true)
	for _, k := range definedKeys(t, r) { // (the hand-written record is what tells of a)
		if err := regsOf(r).DeleteRegister(definedBucket, k); err != nil {
			t.Fatal(err)
		}
	}
	w := pooledHourly("a", "etl")
	v, err := json.Marshal(departure{Workflow: &w, Pool: "etl", Slots: []time.Time{start, start, start}})
	if err != nil {
		t.Fatal(err)
	}
	if err := regsOf(r).PutRegister(departedBucket, departedRecordKey(departedKey("a", "etl"), v), v); err != nil {
		t.Fatal(err)
	}
	fixture.WriteProject(t, r.wdir, "p", pooledHourly("b", "etl"))
	r.reopen()
	r.step(ts("2026-11-24T09:30Z"))
	r.step(ts("2026-11-24T09:31Z"))
	if st := r.state("a", start); st.Status != slot.Running {
		t.Fatalf("a's slot is %s, want RUNNING", st.Status)
	}
	if st := r.state("b", ts("2026-11-24T09:00Z")); st.Status != slot.Running {
		t.Errorf("b's 09:00 slot is %s in etl of 2 beside a's one running slot, want RUNNING (a's slot counted once)", st.Status)
	}
}
