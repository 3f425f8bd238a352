package ui

import (
	"strings"
	"testing"

	"github.com/celos-go/celos/scheduler/trigger"
)

// TestNewTriggerKindsInDrawer: the drawer names the dataVolume, failure,
// sinceLast and event triggers as authors write them, with their
// explanation (dataVolume's count and bytes).
func TestNewTriggerKindsInDrawer(t *testing.T) {
	svc := demoService()
	files, bytes := int64(3), int64(3500)
	svc.trig["ingest-clicks"] = trigger.Status{Type: trigger.TypeOr, Description: "None of the nested triggers are ready", SubStatuses: []trigger.Status{
		{Type: trigger.TypeDataVolume, Description: "3 files, 3500 bytes (3.50 kB) match /in/2026-11-22/part-*: not ready (need 4 files)", Files: &files, Bytes: &bytes, SubStatuses: []trigger.Status{}},
		{Type: trigger.TypeSinceLast, Description: "Not ready, only 2h0m0s since the last successful slot of ingest-clicks (2026-11-22T03:00:00.000Z); ready from slot 2026-11-22T07:00:00.000Z", SubStatuses: []trigger.Status{}},
		{Type: trigger.TypeFailure, Description: "Workflow slot a@2026-11-22T05:00:00.000Z has not failed: it is SUCCESS", SubStatuses: []trigger.Status{}},
		{Type: trigger.TypeEvent, Description: "Register ingest/clicks-2026112205 does not exist", SubStatuses: []trigger.Status{}},
	}}
	h := newTestHandler(t, svc, Options{})
	body := wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-clicks&time=2026-11-22T05:00Z"), 200)
	for _, want := range []string{
		`<span class="tt">dataVolume</span> <span class="td">3 files, 3500 bytes (3.50 kB) match /in/2026-11-22/part-*: not ready (need 4 files)</span>`,
		`<span class="tt">sinceLast</span>`,
		`<span class="tt">failure</span>`,
		`<span class="tt">event</span> <span class="td">Register ingest/clicks-2026112205 does not exist</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("drawer lacks %s", want)
		}
	}
}
