package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
	"pgregory.net/rapid"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func st(h int, status slot.Status, retry int, ext string) slot.State {
	return slot.State{ID: slot.ID{Workflow: "wf", Time: t0.Add(time.Duration(h) * time.Hour)}, Status: status, RetryCount: retry, ExternalID: ext}
}

var (
	ready    = Observation{TriggerReady: true}
	notReady = Observation{}
	trigErr  = Observation{TriggerErr: errors.New("namenode down")}
	running  = Observation{Job: external.Status{Running: true}}
	success  = Observation{Job: external.Status{Success: true}}
	failed   = Observation{Job: external.Status{}}
	jobErr   = Observation{JobErr: external.ErrUnavailable}
)

func TestDecideTable(t *testing.T) {
	never := Policy{Concurrency: 1, WaitTimeoutSeconds: workflow.NeverTimeout}
	tests := []struct {
		name    string
		p       Policy
		now     time.Time
		slots   []slot.State
		obs     []Observation
		submit  []int
		changes []Change
	}{
		{name: "waiting and trigger ready → READY", p: never, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Waiting, 2, "")}, obs: []Observation{ready},
			changes: []Change{{0, st(0, slot.Ready, 2, "")}}},
		{name: "waiting, not ready, no timeout → nothing", p: never, now: t0.Add(1000 * time.Hour),
			slots: []slot.State{st(0, slot.Waiting, 0, "")}, obs: []Observation{notReady}},
		{name: "timeout is strictly after slot time + seconds", p: Policy{Concurrency: 1, WaitTimeoutSeconds: 60}, now: t0.Add(60 * time.Second),
			slots: []slot.State{st(0, slot.Waiting, 0, "")}, obs: []Observation{notReady}},
		{name: "timeout → WAIT_TIMEOUT", p: Policy{Concurrency: 1, WaitTimeoutSeconds: 60}, now: t0.Add(61 * time.Second),
			slots: []slot.State{st(0, slot.Waiting, 1, "")}, obs: []Observation{notReady},
			changes: []Change{{0, st(0, slot.WaitTimeout, 1, "")}}},
		{name: "ready wins over timeout", p: Policy{Concurrency: 1, WaitTimeoutSeconds: 0}, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Waiting, 0, "")}, obs: []Observation{ready},
			changes: []Change{{0, st(0, slot.Ready, 0, "")}}},
		{name: "trigger error never times out", p: Policy{Concurrency: 1, WaitTimeoutSeconds: 0}, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Waiting, 0, "")}, obs: []Observation{trigErr}},
		{name: "serial picks oldest READY up to concurrency − running", p: Policy{Concurrency: 2, WaitTimeoutSeconds: workflow.NeverTimeout}, now: t0.Add(9 * time.Hour),
			slots:  []slot.State{st(0, slot.Success, 0, "a"), st(1, slot.Running, 0, "b"), st(2, slot.Waiting, 0, ""), st(3, slot.Ready, 0, ""), st(4, slot.Ready, 0, "")},
			obs:    []Observation{{}, running, notReady, {}, {}},
			submit: []int{3}},
		{name: "newer READY runs before older WAITING", p: never, now: t0.Add(9 * time.Hour),
			slots: []slot.State{st(0, slot.Waiting, 0, ""), st(1, slot.Ready, 0, "")}, obs: []Observation{notReady, {}},
			submit: []int{1}},
		{name: "no capacity, no submission; READY untouched", p: never, now: t0.Add(9 * time.Hour),
			slots: []slot.State{st(0, slot.Running, 0, "a"), st(1, slot.Ready, 0, "")}, obs: []Observation{running, {}}},
		{name: "capacity freed this step is used next step", p: never, now: t0.Add(9 * time.Hour),
			slots: []slot.State{st(0, slot.Running, 0, "a"), st(1, slot.Ready, 0, "")}, obs: []Observation{success, {}},
			changes: []Change{{0, st(0, slot.Success, 0, "a")}}},
		{name: "failure with retries left → WAITING retry+1, no external ID", p: Policy{Concurrency: 1, MaxRetryCount: 2, WaitTimeoutSeconds: workflow.NeverTimeout}, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Running, 1, "x")}, obs: []Observation{failed},
			changes: []Change{{0, st(0, slot.Waiting, 2, "")}}},
		{name: "failure with no retries left → FAILURE keeps ID", p: Policy{Concurrency: 1, MaxRetryCount: 2, WaitTimeoutSeconds: workflow.NeverTimeout}, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Running, 2, "x")}, obs: []Observation{failed},
			changes: []Change{{0, st(0, slot.Failure, 2, "x")}}},
		{name: "killed by its service's Kill → KILLED keeps ID, retryCount reset as a kill does", p: Policy{Concurrency: 1, MaxRetryCount: 2, WaitTimeoutSeconds: workflow.NeverTimeout}, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Running, 1, "x")}, obs: []Observation{{Job: external.Status{Killed: true}}},
			changes: []Change{{0, st(0, slot.Killed, 0, "x")}}},
		{name: "status error leaves RUNNING", p: never, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Running, 0, "x")}, obs: []Observation{jobErr}},
		{name: "final slots never change", p: never, now: t0.Add(time.Hour),
			slots: []slot.State{st(0, slot.Success, 0, "x"), st(1, slot.Failure, 0, "y"), st(2, slot.WaitTimeout, 0, ""), st(3, slot.Killed, 0, "")},
			obs:   []Observation{ready, failed, ready, success}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.p, tc.slots, tc.now, tc.obs)
			if fmt.Sprint(d.Submit) != fmt.Sprint(tc.submit) {
				t.Errorf("submit %v, want %v", d.Submit, tc.submit)
			}
			if fmt.Sprint(d.Changes) != fmt.Sprint(tc.changes) {
				t.Errorf("changes\n got %v\nwant %v", d.Changes, tc.changes)
			}
		})
	}
}

// legal reports whether from → to is one of Celos's step transitions.
func legal(from, to slot.State) bool {
	switch {
	case from.Status == slot.Waiting && to.Status == slot.Ready:
		return to.RetryCount == from.RetryCount && to.ExternalID == ""
	case from.Status == slot.Waiting && to.Status == slot.WaitTimeout:
		return to.RetryCount == from.RetryCount
	case from.Status == slot.Running && (to.Status == slot.Success || to.Status == slot.Failure):
		return to.ExternalID == from.ExternalID && to.RetryCount == from.RetryCount
	case from.Status == slot.Running && to.Status == slot.Waiting:
		return to.RetryCount == from.RetryCount+1 && to.ExternalID == ""
	case from.Status == slot.Running && to.Status == slot.Ready: // its job never started
		return to.RetryCount == from.RetryCount && to.ExternalID == ""
	case from.Status == slot.Running && to.Status == slot.Killed: // its service's Kill ended the job
		return to.RetryCount == 0 && to.ExternalID == from.ExternalID
	}
	return false
}

func TestDecideProperties(t *testing.T) {
	statuses := rapid.SampledFrom(slot.Statuses)
	rapid.Check(t, func(t *rapid.T) {
		p := Policy{
			Concurrency:        rapid.IntRange(1, 4).Draw(t, "concurrency"),
			MaxRetryCount:      rapid.IntRange(0, 3).Draw(t, "maxRetry"),
			WaitTimeoutSeconds: rapid.SampledFrom([]int64{0, 3600, 7200, workflow.NeverTimeout}).Draw(t, "timeout"),
		}
		n := rapid.IntRange(0, 12).Draw(t, "n")
		slots := make([]slot.State, n)
		obs := make([]Observation, n)
		for i := range slots {
			s := statuses.Draw(t, "status")
			ext := ""
			if s != slot.Waiting && s != slot.Ready {
				ext = fmt.Sprintf("job-%d", i)
			}
			slots[i] = st(i, s, rapid.IntRange(0, 3).Draw(t, "retry"), ext)
			obs[i] = Observation{
				TriggerReady: rapid.Bool().Draw(t, "ready"),
				Job:          external.Status{Running: rapid.Bool().Draw(t, "running"), Success: rapid.Bool().Draw(t, "success")},
			}
			obs[i].Job.NeverStarted = !obs[i].Job.Success && rapid.IntRange(0, 3).Draw(t, "neverStarted") == 0
			obs[i].Job.Killed = !obs[i].Job.Success && !obs[i].Job.NeverStarted && rapid.IntRange(0, 3).Draw(t, "killed") == 0
			if rapid.IntRange(0, 5).Draw(t, "err") == 0 {
				obs[i].TriggerErr, obs[i].JobErr = errors.New("x"), errors.New("y")
			}
		}
		now := t0.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "now")) * time.Hour)
		d := Decide(p, slots, now, obs)

		touched := map[int]bool{}
		runningBefore := 0
		for _, s := range slots {
			if s.Status == slot.Running {
				runningBefore++
			}
		}
		for _, i := range d.Submit {
			if slots[i].Status != slot.Ready {
				t.Fatalf("submitting %v", slots[i])
			}
			if touched[i] {
				t.Fatalf("slot %d decided twice", i)
			}
			touched[i] = true
		}
		if len(d.Submit) > 0 && runningBefore+len(d.Submit) > p.Concurrency {
			t.Fatalf("concurrency %d exceeded: %d running + %d submitted", p.Concurrency, runningBefore, len(d.Submit))
		}
		for _, c := range d.Changes {
			from := slots[c.Index]
			if touched[c.Index] {
				t.Fatalf("slot %d decided twice", c.Index)
			}
			touched[c.Index] = true
			if from.Status.Final() {
				t.Fatalf("final slot changed: %v → %v", from, c.To)
			}
			if !legal(from, c.To) || c.To.ID != from.ID {
				t.Fatalf("illegal transition %v → %v", from, c.To)
			}
			if obs[c.Index].TriggerErr != nil && from.Status == slot.Waiting || obs[c.Index].JobErr != nil && from.Status == slot.Running {
				t.Fatalf("transition despite an observation error: %v → %v", from, c.To)
			}
			if from.Status == slot.Running && (c.To.Status == slot.Ready) != obs[c.Index].Job.NeverStarted {
				t.Fatalf("RUNNING → %v with a job that never started = %v", c.To.Status, obs[c.Index].Job.NeverStarted)
			}
		}
	})
}
