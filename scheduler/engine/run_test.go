package engine

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// poolRig is a rig whose engine has a pools file and records events.
type poolRig struct {
	*rig
	pools  string
	mu     sync.Mutex
	events []scheduler.Event
}

func newPoolRig(t tlike, pools string, clock func() time.Time, ws ...workflow.Workflow) *poolRig {
	t.Helper()
	r := &poolRig{rig: &rig{t: t, wdir: t.TempDir(), ddir: t.TempDir(), svc: newFake()}}
	fixture.WriteProject(t, r.wdir, "p", ws...)
	r.pools = filepath.Join(t.TempDir(), "pools.json")
	if pools != "" {
		if err := os.WriteFile(r.pools, []byte(pools), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	r.db, err = statedb.OpenWith(r.ddir, statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.db.Close() })
	r.e, err = New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: r.svc},
		Logger: discard, PoolsFile: r.pools, Clock: clock, OnEvent: func(ev scheduler.Event) {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *poolRig) takeEvents() []scheduler.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.events
	r.events = nil
	return evs
}

func problemsOf(e *Engine, wf, op string) []scheduler.Problem {
	var out []scheduler.Problem
	for _, p := range e.Problems(wf) {
		if p.Op == op {
			out = append(out, p)
		}
	}
	return out
}

func TestPoolAcrossWorkflowsByPriority(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	mk := func(id string, prio int) workflow.Workflow {
		w := fixture.Hourly(id)
		w.StartTime = start
		w.Pool, w.Priority = "etl", prio
		return w
	}
	free := fixture.Hourly("free")
	free.StartTime = start
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 2}}}`, nil, mk("low", 0), mk("high", 10), mk("mid", 5), free)
	now := ts("2026-11-24T08:30Z")
	r.step(now)                         // WAITING → READY
	rep := r.step(now.Add(time.Minute)) // submissions
	var got []string
	for _, id := range r.svc.submitted() {
		got = append(got, id.Workflow)
	}
	if d := cmp.Diff([]string{"free", "high", "mid"}, got); d != "" {
		t.Errorf("submitted (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]PoolUse{"etl": {Limit: 2, Running: 2, Waiting: 1}}, rep.Pools); d != "" {
		t.Errorf("pools (-want +got):\n%s", d)
	}
	held := problemsOf(r.e, "low", "pool")
	if len(held) != 1 || !strings.Contains(held[0].Error, `pool "etl" is full: 2 of 2 running`) {
		t.Errorf("low's problems = %+v", r.e.Problems("low"))
	}
	if st := r.state("low", start); st.Status != slot.Ready {
		t.Errorf("low is %s, want READY", st.Status)
	}
	// high finishes: low takes its place at the next step, and its hold goes.
	r.svc.finish(slot.ID{Workflow: "high", Time: start}, true)
	r.step(now.Add(2 * time.Minute)) // high → SUCCESS (capacity freed for the next step)
	if n := len(r.svc.submitted()); n != 3 {
		t.Fatalf("%d submissions in the step that saw high finish, want none new", n-3)
	}
	r.step(now.Add(3 * time.Minute))
	if st := r.state("low", start); st.Status != slot.Running {
		t.Errorf("low is %s, want RUNNING", st.Status)
	}
	if p := problemsOf(r.e, "low", "pool"); len(p) != 0 {
		t.Errorf("hold not cleared: %+v", p)
	}
	// The pools file is re-read: limit 1 with two running holds new slots.
	if err := os.WriteFile(r.pools, []byte(`{"pools": {"etl": {"limit": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = r.step(ts("2026-11-24T09:30Z"))
	rep = r.step(ts("2026-11-24T09:31Z"))
	if u := rep.Pools["etl"]; u.Limit != 1 || u.Running != 2 || u.Waiting != 1 {
		// low and mid still have their 08:00 slots running (their serial
		// strategies choose nothing more); high's 09:00 is the only
		// candidate, and waits.
		t.Errorf("after the limit was lowered: %+v", u)
	}
	if st := r.state("high", ts("2026-11-24T09:00Z")); st.Status != slot.Ready {
		t.Errorf("high 09:00 is %s, want READY (pool over its limit)", st.Status)
	}
}

func TestUndefinedPoolAndBadPoolsFile(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	w := fixture.Hourly("lost")
	w.StartTime, w.Pool = start, "nope"
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 2}}}`, nil, w)
	var logs strings.Builder
	r.e.log = slog.New(slog.NewTextHandler(&logs, nil))
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	r.step(ts("2026-11-24T08:31:30Z"))
	if n := strings.Count(logs.String(), `msg="workflow names an undefined pool" workflow=lost`); n != 1 {
		t.Errorf("the undefined pool was logged %d times in 3 steps, want once", n)
	}
	if n := len(r.svc.submitted()); n != 0 {
		t.Errorf("%d submissions of a workflow whose pool is undefined", n)
	}
	var wfLevel []scheduler.Problem
	for _, p := range problemsOf(r.e, "lost", "pool") {
		if p.Slot.IsZero() {
			wfLevel = append(wfLevel, p)
		}
	}
	if len(wfLevel) != 1 || !strings.Contains(wfLevel[0].Error, `pool "nope" is not defined: the pools file `+r.pools+` does not define it`) {
		t.Errorf("workflow problems = %+v", r.e.Problems("lost"))
	}
	// A bad pools file: reported as a load error; the last good version stays.
	if err := os.WriteFile(r.pools, []byte(`{"pools": {"nope": {"limit": 0}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:32Z"))
	les := r.e.LoadErrors()
	if len(les) != 1 || les[0].File != r.pools || !strings.Contains(les[0].Error, "limit 0") {
		t.Errorf("LoadErrors = %+v", les)
	}
	// Fixed: the pool exists, the slot runs, the problems go.
	if err := os.WriteFile(r.pools, []byte(`{"pools": {"nope": {"limit": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2026-11-24T08:33Z"))
	if n := len(r.svc.submitted()); n != 1 {
		t.Errorf("%d submissions once the pool was defined, want 1", n)
	}
	if p := r.e.Problems("lost"); len(p) != 0 || len(r.e.LoadErrors()) != 0 {
		t.Errorf("problems %+v, load errors %+v", p, r.e.LoadErrors())
	}
}

func TestTimeWindowHoldsReadySlots(t *testing.T) {
	w := fixture.Hourly("nightly")
	w.StartTime = ts("2026-11-24T12:00Z")
	w.Constraints = &workflow.Constraints{TimeWindow: &workflow.TimeWindow{From: "22:00", To: "06:00", TimeZone: "Europe/Berlin"},
		TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	r := newPoolRig(t, "", nil, w)
	r.step(ts("2026-11-24T12:30Z"))
	r.step(ts("2026-11-24T12:31Z"))
	if n := len(r.svc.submitted()); n != 0 {
		t.Fatalf("%d submissions outside the window", n)
	}
	held := problemsOf(r.e, "nightly", "constraint")
	if len(held) != 1 || !strings.Contains(held[0].Error, "outside the time window 22:00–06:00 Europe/Berlin") {
		t.Errorf("problems = %+v", r.e.Problems("nightly"))
	}
	// 21:00Z is 22:00 in Berlin: the oldest READY slot runs, its hold goes.
	r.step(ts("2026-11-24T21:00Z"))
	if got := r.svc.submitted(); len(got) != 1 || !got[0].Time.Equal(ts("2026-11-24T12:00Z")) {
		t.Errorf("submitted %v, want the 12:00 slot", got)
	}
	if p := problemsOf(r.e, "nightly", "constraint"); len(p) != 0 {
		t.Errorf("hold of the submitted slot not cleared: %+v", p)
	}
}

func TestMinIntervalSurvivesRestart(t *testing.T) {
	w := fixture.Hourly("spaced")
	w.StartTime = ts("2026-11-24T00:00Z")
	w.SchedulingStrategy.Concurrency = 5
	w.Constraints = &workflow.Constraints{MinIntervalSeconds: 3 * 3600, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	r := newPoolRig(t, "", nil, w)
	r.step(ts("2026-11-24T00:10Z"))
	r.step(ts("2026-11-24T00:11Z"))
	if n := len(r.svc.submitted()); n != 1 {
		t.Fatalf("%d submissions, want 1", n)
	}
	r.svc.finishAll(true)
	r.step(ts("2026-11-24T01:30Z")) // 00:00 → SUCCESS, 01:00 READY
	r.step(ts("2026-11-24T01:31Z"))
	if n := len(r.svc.submitted()); n != 1 {
		t.Fatalf("%d submissions within minInterval, want 1", n)
	}
	// A new engine on the same state: the 00:00 run counts at the time it
	// was submitted, 00:11 (see also runs_restart_test.go).
	e2, err := New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: r.svc}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Step(context.Background(), ts("2026-11-24T03:10Z"), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(r.svc.submitted()); n != 1 {
		t.Fatalf("after a restart: %d submissions within minInterval, want 1", n)
	}
	if err := e2.Step(context.Background(), ts("2026-11-24T03:11Z"), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(r.svc.submitted()); n != 2 {
		t.Fatalf("after minInterval: %d submissions, want 2", n)
	}
}

func TestSLAMissedAndEvents(t *testing.T) {
	clock := func() time.Time { return ts("2026-11-24T00:00Z") }
	w := fixture.Hourly("feed")
	w.StartTime = ts("2026-11-24T08:00Z")
	w.MaxRetryCount = 1
	w.SLA = &workflow.SLA{SuccessWithinSeconds: 3 * 3600}
	w.Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/hook", Events: workflow.Events}}
	r := newPoolRig(t, "", clock, w)
	s8 := ts("2026-11-24T08:00Z")
	r.step(ts("2026-11-24T08:10Z")) // READY
	r.step(ts("2026-11-24T08:11Z")) // RUNNING
	r.svc.finishAll(false)
	r.step(ts("2026-11-24T08:20Z")) // → WAITING, retry 1
	r.step(ts("2026-11-24T08:21Z")) // READY
	r.step(ts("2026-11-24T08:22Z")) // RUNNING
	r.svc.finishAll(false)
	r.step(ts("2026-11-24T08:30Z")) // → FAILURE
	evs := r.takeEvents()
	if len(evs) != 1 || evs[0].Kind != workflow.EventFailure || !evs[0].Slot.Equal(s8) || evs[0].Status != slot.Failure || evs[0].RetryCount != 1 {
		t.Fatalf("events = %+v, want one failure of 08:00", evs)
	}
	// The failed slot is looked at until its deadline (11:00) passes.
	if rep := r.step(ts("2026-11-24T10:59Z")); rep.SLAMissed["feed"] != 0 {
		t.Errorf("SLA missed before the deadline")
	}
	rep := r.step(ts("2026-11-24T11:00:01Z"))
	if rep.SLAMissed["feed"] != 1 {
		t.Errorf("SLAMissed = %v, want feed: 1 (the 08:00 slot)", rep.SLAMissed)
	}
	evs = r.takeEvents()
	if len(evs) != 1 || evs[0].Kind != workflow.EventSLAMissed || !evs[0].Slot.Equal(s8) {
		t.Fatalf("events = %+v, want the SLA miss of 08:00", evs)
	}
	p := problemsOf(r.e, "feed", "sla")
	if len(p) != 1 || !strings.Contains(p[0].Error, "SLA missed: not SUCCESS 3h after the slot time (deadline 2026-11-24T11:00:00.000Z)") {
		t.Errorf("sla problems = %+v", p)
	}
	// Noted once: later steps neither count nor send it again (the 09:00
	// slot, RUNNING since 11:00, misses its own deadline at 12:00).
	if rep := r.step(ts("2026-11-24T12:10Z")); rep.SLAMissed["feed"] != 1 {
		t.Errorf("SLAMissed = %v at 12:10, want feed: 1 (09:00)", rep.SLAMissed)
	}
	for _, ev := range r.takeEvents() {
		if ev.Kind == workflow.EventSLAMissed && ev.Slot.Equal(s8) {
			t.Errorf("SLA miss of 08:00 sent again")
		}
	}
	// Success after a retry is an event too: 09:00 fails once, then
	// every job succeeds.
	r.svc.finish(slot.ID{Workflow: "feed", Time: ts("2026-11-24T09:00Z")}, false)
	var kinds []string
	for m := 11; m < 30; m++ {
		r.step(ts("2026-11-24T12:" + itoa(m) + "Z"))
		r.svc.finishAll(true)
		for _, ev := range r.takeEvents() {
			kinds = append(kinds, ev.Kind+"@"+slot.FormatTime(ev.Slot))
		}
	}
	want := "successAfterRetries@2026-11-24T09:00:00.000Z"
	if !strings.Contains(strings.Join(kinds, " "), want) {
		t.Errorf("events %v, want %s among them", kinds, want)
	}
}

// Property: with several workflows in two pools, random limits,
// priorities, job outcomes and pauses, no step ever leaves a pool with more
// RUNNING slots than its limit (the order within a pool is pool.Admit's,
// tested by its own property test).
func TestPoolLimitProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		t := &tb{T: rt}
		defer t.done()
		start := ts("2026-11-24T00:00Z")
		limits := map[string]int{"a": rapid.IntRange(1, 3).Draw(rt, "limitA"), "b": rapid.IntRange(1, 2).Draw(rt, "limitB")}
		var ws []workflow.Workflow
		poolOf := map[string]string{}
		for i, n := 0, rapid.IntRange(2, 4).Draw(rt, "workflows"); i < n; i++ {
			w := fixture.Hourly(string(rune('p' + i)))
			w.StartTime = start
			w.SchedulingStrategy.Concurrency = rapid.IntRange(1, 3).Draw(rt, "concurrency")
			w.Pool = rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "pool")
			w.Priority = rapid.IntRange(0, 2).Draw(rt, "priority")
			poolOf[w.ID] = w.Pool
			ws = append(ws, w)
		}
		r := newPoolRig(t, `{"pools": {"a": {"limit": `+itoa(limits["a"])+`}, "b": {"limit": `+itoa(limits["b"])+`}}}`, nil, ws...)
		now := start.Add(30 * time.Minute)
		for step := 0; step < 8; step++ {
			now = now.Add(time.Duration(rapid.IntRange(1, 90).Draw(rt, "advance")) * time.Minute)
			if rapid.Bool().Draw(rt, "finish") {
				r.svc.finishAll(rapid.Bool().Draw(rt, "success"))
			}
			if rapid.IntRange(0, 5).Draw(rt, "pause") == 0 {
				id := ws[rapid.IntRange(0, len(ws)-1).Draw(rt, "which")].ID
				if err := r.db.SetPaused(id, !r.db.Paused(id)); err != nil {
					t.Fatal(err)
				}
			}
			r.step(now)
			running := map[string]int{}
			for _, w := range ws {
				active, err := r.db.Active(w.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range active {
					if st.Status == slot.Running {
						running[w.Pool]++
					}
				}
			}
			for name, n := range running {
				if n > limits[name] {
					rt.Fatalf("step %d at %s: pool %s has %d RUNNING, limit %d", step, now, name, n, limits[name])
				}
			}
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// A hold is logged when it appears or changes, not at every step it lasts.
func TestHoldLoggedOnce(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = start, start
	a.Pool, b.Pool, a.Priority = "etl", "etl", 1
	r := newPoolRig(t, `{"pools": {"etl": {"limit": 1}}}`, nil, a, b)
	var logs strings.Builder
	r.e.log = slog.New(slog.NewTextHandler(&logs, nil))
	for m := 30; m < 36; m++ {
		r.step(ts("2026-11-24T08:" + itoa(m) + "Z"))
	}
	if n := strings.Count(logs.String(), `msg="slot held" slot=b@2026-11-24T08:00:00.000Z`); n != 1 {
		t.Errorf("the hold of b was logged %d times, want once:\n%s", n, logs.String())
	}
	if p := problemsOf(r.e, "b", "pool"); len(p) != 1 {
		t.Errorf("b's pool problems: %+v", p)
	}
}

// A READY slot whose submission may have reached the service before a
// crash (a submit intent) is recovered, not given up by its constraints'
// timeout nor held by its time window: a job may exist.
func TestConstraintsSpareASlotWithAnIntent(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2026-11-24T00:00Z")
	w.Constraints = &workflow.Constraints{TimeWindow: &workflow.TimeWindow{From: "00:00", To: "01:00", TimeZone: "UTC"},
		TimeoutSeconds: 3600, OnTimeout: workflow.OnTimeoutGiveUp}
	f := newFake()
	r := newRig(t, recoverer{f}, w)
	id := slot.ID{Workflow: "wf", Time: ts("2026-11-24T00:00Z")}
	r.step(ts("2026-11-24T00:10Z")) // READY
	// The crash: the job was accepted, the RUNNING state never written.
	if err := r.db.PutIntent(id, intentAt(time.Now().Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	ext, err := f.Submit(context.Background(), &w, id)
	if err != nil {
		t.Fatal(err)
	}
	// Hours later: outside the window, past the constraints' timeout.
	r.step(ts("2026-11-24T03:00Z"))
	if st := r.state("wf", id.Time); st.Status != slot.Running || st.ExternalID != ext {
		t.Fatalf("slot %+v, want RUNNING with the recovered job %s", st, ext)
	}
	if n := len(f.submitted()); n != 1 {
		t.Errorf("%d submissions, want the one before the crash", n)
	}
}

// A slot that times out, waiting for its trigger or for its run
// constraints, is a waitTimeout event for the targets that want it, and
// only for them.
func TestWaitTimeoutEvents(t *testing.T) {
	start := ts("2026-11-24T08:00Z")
	hook := func(events ...string) []workflow.Notification {
		return []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/", Events: events}}
	}
	trig := fixture.Hourly("trig") // its trigger is never ready: 1 hour, then WAIT_TIMEOUT
	trig.StartTime, trig.WaitTimeoutSeconds = start, 3600
	trig.Trigger = workflow.Trigger{Type: workflow.TriggerNot, Trigger: &workflow.Trigger{Type: workflow.TriggerAlways}}
	trig.Notify = hook(workflow.EventWaitTimeout)
	cons := fixture.Hourly("cons") // READY at once, held by its window, given up after 1 hour
	cons.StartTime = start
	cons.Constraints = &workflow.Constraints{TimeWindow: &workflow.TimeWindow{From: "22:00", To: "06:00", TimeZone: "UTC"},
		TimeoutSeconds: 3600, OnTimeout: workflow.OnTimeoutGiveUp}
	cons.Notify = hook(workflow.EventWaitTimeout)
	deaf := cons // the same, but its target wants failures only
	deaf.ID, deaf.Notify = "deaf", hook(workflow.EventFailure)
	r := newPoolRig(t, "", nil, trig, cons, deaf)
	r.step(ts("2026-11-24T08:30Z"))
	r.step(ts("2026-11-24T08:31Z"))
	if evs := r.takeEvents(); len(evs) != 0 {
		t.Fatalf("events before any timeout: %+v", evs)
	}
	r.step(ts("2026-11-24T09:00:01Z"))
	var got []string
	for _, ev := range r.takeEvents() {
		got = append(got, ev.Kind+" "+ev.Workflow+" "+string(ev.Status)+" "+slot.FormatTime(ev.Slot))
	}
	want := []string{
		"waitTimeout trig WAIT_TIMEOUT 2026-11-24T08:00:00.000Z",
		"waitTimeout cons WAIT_TIMEOUT 2026-11-24T08:00:00.000Z",
	}
	sort.Strings(got)
	sort.Strings(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}
