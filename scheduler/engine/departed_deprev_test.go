package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
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
