package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

func TestCheckConstraints(t *testing.T) {
	night := &workflow.TimeWindow{From: "22:00", To: "06:00", TimeZone: "Europe/Berlin"}
	at := func(s string) time.Time { return ts(s) }
	tests := []struct {
		name string
		c    workflow.Constraints
		now  string
		runs []string
		want string // "" or a part of the reason
	}{
		{"inside the window after midnight", workflow.Constraints{TimeWindow: night}, "2026-01-10T02:00Z", nil, ""},
		{"outside the window at noon", workflow.Constraints{TimeWindow: night}, "2026-01-10T12:00Z", nil, "outside the time window 22:00–06:00 Europe/Berlin"},
		{"window in summer time (22:30 CEST)", workflow.Constraints{TimeWindow: night}, "2026-07-10T20:30Z", nil, ""},
		{"window in winter time (21:30 CET)", workflow.Constraints{TimeWindow: night}, "2026-01-10T20:30Z", nil, "outside the time window"},
		{"minInterval not yet", workflow.Constraints{MinIntervalSeconds: 4 * 3600}, "2026-01-10T03:59Z", []string{"2026-01-10T00:00Z"},
			"minInterval 4h: the last submission was at 2026-01-10T00:00:00.000Z, the next may be at 2026-01-10T04:00:00.000Z"},
		{"minInterval passed", workflow.Constraints{MinIntervalSeconds: 4 * 3600}, "2026-01-10T04:00Z", []string{"2026-01-10T00:00Z"}, ""},
		{"minInterval no run yet", workflow.Constraints{MinIntervalSeconds: 4 * 3600}, "2026-01-10T04:00Z", nil, ""},
		{"maxRuns reached", workflow.Constraints{MaxRuns: &workflow.MaxRuns{Count: 2, PeriodSeconds: 86400}}, "2026-01-10T12:00Z",
			[]string{"2026-01-09T06:00Z", "2026-01-09T13:00Z", "2026-01-10T01:00Z"},
			"maxRuns 2 per 24h: 2 submissions in the last 24h, the next may be at 2026-01-10T13:00:00.000Z"},
		{"maxRuns a place free", workflow.Constraints{MaxRuns: &workflow.MaxRuns{Count: 2, PeriodSeconds: 86400}}, "2026-01-10T13:00Z",
			[]string{"2026-01-09T06:00Z", "2026-01-09T13:00Z", "2026-01-10T01:00Z"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs []time.Time
			for _, r := range tt.runs {
				runs = append(runs, at(r))
			}
			got := CheckConstraints(&tt.c, at(tt.now), runs)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("CheckConstraints = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecideConstraints(t *testing.T) {
	window := func(timeout int64, on string) *workflow.Constraints {
		return &workflow.Constraints{TimeWindow: &workflow.TimeWindow{From: "22:00", To: "06:00", TimeZone: "UTC"}, TimeoutSeconds: timeout, OnTimeout: on}
	}
	p := func(c *workflow.Constraints, conc int, runs ...time.Time) Policy {
		return Policy{Concurrency: conc, WaitTimeoutSeconds: workflow.NeverTimeout, Constraints: c, Runs: runs}
	}
	noon := t0.Add(12 * time.Hour)
	tests := []struct {
		name    string
		p       Policy
		now     time.Time
		slots   []slot.State
		submit  []int
		changes []Change
		held    []int
		intent  bool // every slot has a submit intent
	}{
		{name: "outside the window: held, takes no place", p: p(window(workflow.NeverTimeout, workflow.OnTimeoutGiveUp), 1), now: noon,
			slots: []slot.State{st(0, slot.Ready, 0, ""), st(1, slot.Ready, 0, "")}, held: []int{0, 1}},
		{name: "inside the window: the serial strategy", p: p(window(workflow.NeverTimeout, workflow.OnTimeoutGiveUp), 1), now: t0.Add(23 * time.Hour),
			slots: []slot.State{st(0, slot.Ready, 0, ""), st(1, slot.Ready, 0, "")}, submit: []int{0}},
		{name: "timed out: WAIT_TIMEOUT", p: p(window(3600, workflow.OnTimeoutGiveUp), 1), now: noon,
			slots: []slot.State{st(0, slot.Ready, 1, ""), st(11, slot.Ready, 0, "")}, held: []int{1},
			changes: []Change{{0, st(0, slot.WaitTimeout, 1, "")}}},
		{name: "timed out: run anyway", p: p(window(3600, workflow.OnTimeoutRun), 1), now: noon,
			slots: []slot.State{st(0, slot.Ready, 0, ""), st(11, slot.Ready, 0, "")}, submit: []int{0}, held: []int{1}},
		{name: "timeout is strictly after", p: p(window(12*3600, workflow.OnTimeoutGiveUp), 1), now: noon,
			slots: []slot.State{st(0, slot.Ready, 0, "")}, held: []int{0}},
		{name: "minInterval counts the step's own submissions", p: p(&workflow.Constraints{MinIntervalSeconds: 60, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}, 3), now: noon,
			slots: []slot.State{st(0, slot.Ready, 0, ""), st(1, slot.Ready, 0, "")}, submit: []int{0}, held: []int{1}},
		{name: "maxRuns with earlier runs", p: p(&workflow.Constraints{MaxRuns: &workflow.MaxRuns{Count: 2, PeriodSeconds: 86400}, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}, 3, t0.Add(time.Hour)), now: noon,
			slots: []slot.State{st(0, slot.Ready, 0, ""), st(1, slot.Ready, 0, ""), st(2, slot.Ready, 0, "")}, submit: []int{0}, held: []int{1, 2}},
		{name: "a slot with a submit intent is neither held nor given up", p: p(window(3600, workflow.OnTimeoutGiveUp), 1), now: noon,
			slots: []slot.State{st(0, slot.Ready, 0, "")}, intent: true, submit: []int{0}},
		{name: "final slots never move", p: p(window(0, workflow.OnTimeoutGiveUp), 1), now: noon,
			slots: []slot.State{st(0, slot.Success, 0, "a"), st(1, slot.Failure, 0, "b"), st(2, slot.WaitTimeout, 0, ""), st(3, slot.Killed, 0, "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := append([]time.Time(nil), tt.p.Runs...)
			obs := make([]Observation, len(tt.slots))
			for i := range obs {
				obs[i].Intent = tt.intent
			}
			d := Decide(tt.p, tt.slots, tt.now, obs)
			var held []int
			for _, h := range d.Held {
				held = append(held, h.Index)
				if h.Why == "" {
					t.Errorf("hold of %d says nothing", h.Index)
				}
			}
			if d := cmp.Diff(tt.submit, d.Submit); d != "" {
				t.Errorf("Submit (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.changes, d.Changes); d != "" {
				t.Errorf("Changes (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.held, held); d != "" {
				t.Errorf("Held (-want +got):\n%s", d)
			}
			if d := cmp.Diff(runs, tt.p.Runs); d != "" {
				t.Errorf("Decide changed the policy's Runs:\n%s", d)
			}
		})
	}
}

// Properties of Decide with random constraints, slots and clocks: a slot
// is never submitted while outside its time window unless its timeout has
// passed and it runs anyway; final slots never change; the minimum
// interval and the maximum runs hold over the step's own submissions too;
// every READY slot is submitted, held, timed out, or waits for capacity.
func TestDecideConstraintProperties(t *testing.T) {
	statuses := []slot.Status{slot.Waiting, slot.Ready, slot.Ready, slot.Ready, slot.Running, slot.Success, slot.Failure, slot.WaitTimeout, slot.Killed}
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"}
	rapid.Check(t, func(rt *rapid.T) {
		clock := func(label string) string {
			return time.Date(2000, 1, 1, rapid.IntRange(0, 23).Draw(rt, label+"h"), rapid.IntRange(0, 59).Draw(rt, label+"m"), 0, 0, time.UTC).Format("15:04")
		}
		c := &workflow.Constraints{
			MinIntervalSeconds: rapid.SampledFrom([]int64{0, 60, 3600, 4 * 3600}).Draw(rt, "minInterval"),
			TimeoutSeconds:     rapid.SampledFrom([]int64{workflow.NeverTimeout, 0, 3600, 86400}).Draw(rt, "timeout"),
			OnTimeout:          rapid.SampledFrom([]string{workflow.OnTimeoutGiveUp, workflow.OnTimeoutRun}).Draw(rt, "onTimeout"),
		}
		if rapid.Bool().Draw(rt, "window") {
			tw := &workflow.TimeWindow{From: clock("from"), To: clock("to"), TimeZone: rapid.SampledFrom(zones).Draw(rt, "zone")}
			if tw.From != tw.To {
				c.TimeWindow = tw
			}
		}
		if rapid.Bool().Draw(rt, "maxRuns") {
			c.MaxRuns = &workflow.MaxRuns{Count: rapid.IntRange(1, 3).Draw(rt, "count"), PeriodSeconds: rapid.SampledFrom([]int64{3600, 86400}).Draw(rt, "period")}
		}
		// A clock anywhere in 2026, DST changes included.
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.IntRange(0, 365*24*60).Draw(rt, "minute")) * time.Minute)
		var runs []time.Time
		for i, n := 0, rapid.IntRange(0, 4).Draw(rt, "runs"); i < n; i++ {
			runs = append(runs, now.Add(-time.Duration(rapid.IntRange(1, 48*60).Draw(rt, "runAgo"))*time.Minute))
		}
		for i := 1; i < len(runs); i++ { // oldest first
			for j := i; j > 0 && runs[j].Before(runs[j-1]); j-- {
				runs[j], runs[j-1] = runs[j-1], runs[j]
			}
		}
		n := rapid.IntRange(1, 8).Draw(rt, "slots")
		slots := make([]slot.State, n)
		for i := range slots {
			slots[i] = slot.State{ID: slot.ID{Workflow: "wf", Time: now.Add(-time.Duration(n-i) * time.Hour)}, Status: rapid.SampledFrom(statuses).Draw(rt, "status")}
		}
		p := Policy{Concurrency: rapid.IntRange(1, 4).Draw(rt, "concurrency"), WaitTimeoutSeconds: workflow.NeverTimeout, Constraints: c, Runs: runs}
		d := Decide(p, slots, now, make([]Observation, n))

		inWindow := c.TimeWindow == nil || c.TimeWindow.Contains(now)
		submitted := append([]time.Time(nil), runs...)
		for _, i := range d.Submit {
			if slots[i].Status != slot.Ready {
				rt.Fatalf("submitted a %s slot", slots[i].Status)
			}
			timedOut := constraintTimedOut(c, slots[i].ID.Time, now)
			if !inWindow && !(timedOut && c.OnTimeout == workflow.OnTimeoutRun) {
				rt.Fatalf("slot %d submitted outside its window %+v at %s", i, *c.TimeWindow, now)
			}
			if !timedOut {
				if why := CheckConstraints(c, now, submitted); why != "" {
					rt.Fatalf("slot %d submitted although %s", i, why)
				}
			}
			submitted = append(submitted, now)
		}
		decided := map[int]bool{}
		for _, i := range d.Submit {
			decided[i] = true
		}
		for _, h := range d.Held {
			if slots[h.Index].Status != slot.Ready || decided[h.Index] {
				rt.Fatalf("held a %s slot, or one decided twice", slots[h.Index].Status)
			}
			decided[h.Index] = true
		}
		for _, ch := range d.Changes {
			from := slots[ch.Index].Status
			if from.Final() {
				rt.Fatalf("a final %s slot changed to %s", from, ch.To.Status)
			}
			if from == slot.Ready && (ch.To.Status != slot.WaitTimeout || c.OnTimeout != workflow.OnTimeoutGiveUp || !constraintTimedOut(c, slots[ch.Index].ID.Time, now)) {
				rt.Fatalf("READY → %s with %+v", ch.To.Status, *c)
			}
			if decided[ch.Index] {
				rt.Fatalf("slot %d decided twice", ch.Index)
			}
			decided[ch.Index] = true
		}
	})
}

func TestMissedSLA(t *testing.T) {
	sla := &workflow.SLA{SuccessWithinSeconds: 3 * 3600}
	tests := []struct {
		name   string
		st     slot.State
		now    time.Time
		missed bool
	}{
		{"waiting before the deadline", st(0, slot.Waiting, 0, ""), t0.Add(3 * time.Hour), false},
		{"waiting after the deadline", st(0, slot.Waiting, 0, ""), t0.Add(3*time.Hour + time.Second), true},
		{"ready (held) after", st(0, slot.Ready, 0, ""), t0.Add(4 * time.Hour), true},
		{"running after", st(0, slot.Running, 1, "x"), t0.Add(4 * time.Hour), true},
		{"failed early, before the deadline", st(0, slot.Failure, 0, "x"), t0.Add(time.Hour), false},
		{"failed, after", st(0, slot.Failure, 0, "x"), t0.Add(4 * time.Hour), true},
		{"timed out, after", st(0, slot.WaitTimeout, 0, ""), t0.Add(4 * time.Hour), true},
		{"success is never a miss", st(0, slot.Success, 0, "x"), t0.Add(400 * time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deadline, missed := MissedSLA(sla, tt.st, tt.now)
			if missed != tt.missed || !deadline.Equal(t0.Add(3*time.Hour)) {
				t.Errorf("MissedSLA = %s, %v; want %s, %v", deadline, missed, t0.Add(3*time.Hour), tt.missed)
			}
		})
	}
	if _, missed := MissedSLA(nil, st(0, slot.Failure, 0, ""), t0.Add(1000*time.Hour)); missed {
		t.Error("no SLA, missed")
	}
}
