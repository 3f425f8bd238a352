package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/schema/workflow"
)

// GET /workflow-slots lists the engine's problems of the workflow: a pool
// that is not defined, a READY slot held by its time window, a missed SLA
// (checked against openapi.json by do).
func TestWorkflowSlotsProblems(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s := newRealServer(t, now)
	start := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	lost := newWorkflow("lost", "0 0 * * * ?", start, workflow.Trigger{Type: workflow.TriggerAlways}, 0)
	lost.Pool = "nope"
	night := newWorkflow("night", "0 0 * * * ?", start, workflow.Trigger{Type: workflow.TriggerAlways}, 0)
	night.Constraints = &workflow.Constraints{TimeWindow: &workflow.TimeWindow{From: "22:00", To: "06:00", TimeZone: "UTC"},
		TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	night.SLA = &workflow.SLA{SuccessWithinSeconds: 3600}
	fixture.WriteProject(t, s.wf, "p", lost, night)
	s.step("2026-11-24T11:30Z")
	s.step("2026-11-24T11:31Z")

	var ws api.WorkflowSlots
	s.do(200, "GET", "/workflow-slots?id=lost", &ws)
	if len(ws.Problems) == 0 || ws.Problems[0].Op != "pool" || !strings.Contains(ws.Problems[0].Error, `pool "nope" is not defined: no pools file is configured (celos server --pools FILE)`) {
		t.Errorf("lost's problems: %+v", ws.Problems)
	}
	ws = api.WorkflowSlots{}
	s.do(200, "GET", "/workflow-slots?id=night", &ws)
	ops := map[string]string{}
	for _, p := range ws.Problems {
		if p.Slot.Equal(start) {
			ops[p.Op] = p.Error
		}
	}
	if !strings.Contains(ops["constraint"], "outside the time window 22:00–06:00 UTC") || !strings.HasPrefix(ops["sla"], "SLA missed: not SUCCESS 1h after the slot time") {
		t.Errorf("night's problems of 10:00: %+v", ws.Problems)
	}
	// /trigger-status says why the READY slot is held.
	var ts api.TriggerStatus
	s.do(200, "GET", "/trigger-status?id=night&time=2026-11-24T10:00Z", &ts)
	if !ts.Ready || ts.Held == nil || ts.Held.Op != "constraint" || ts.Held.Reason != "outside the time window 22:00–06:00 UTC" {
		t.Errorf("trigger-status of night 10:00: %+v held %+v", ts.Status, ts.Held)
	}
	ts = api.TriggerStatus{}
	s.do(200, "GET", "/trigger-status?id=lost&time=2026-11-24T10:00Z", &ts)
	if ts.Held == nil || ts.Held.Op != "pool" || !strings.Contains(ts.Held.Reason, `pool "nope" is not defined`) {
		t.Errorf("trigger-status of lost 10:00: held %+v", ts.Held)
	}
}
