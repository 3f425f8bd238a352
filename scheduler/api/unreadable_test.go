package api_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/faultstore"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// TestWorkflowSlotsListsUnreadableSlots: GET /workflow-slots lists a slot
// of the range whose record does not parse (a torn file, a directory in
// its place) under "unreadable", with why and without the file's content,
// instead of leaving it out: a backfill of the range reruns it (celos
// rerun --from --to reads this answer). "slots" keeps Celos's shape (the
// answer is checked against openapi.json): an old client reads what it
// always did. Real engine and state database.
func TestWorkflowSlotsListsUnreadableSlots(t *testing.T) {
	now := time.Date(2015, 9, 13, 16, 30, 0, 0, time.UTC)
	s := newRealServer(t, now)
	w := newWorkflow("wc", fixture.HourlyCron, time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC), workflow.Trigger{Type: workflow.TriggerAlways}, 0)
	fixture.WriteProject(t, s.wf, "p", w)
	s.step("2015-09-13T16:30Z")
	day := tearSlot(t, s, "wc", "13:00:00.000Z")
	os.Remove(filepath.Join(day, "15:00:00.000Z"))
	if err := os.Mkdir(filepath.Join(day, "15:00:00.000Z"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Reload(); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Unreadable []map[string]string `json:"unreadable"`
		Slots      []map[string]any    `json:"slots"`
	}
	body := s.do(200, "GET", "/workflow-slots?id=wc&start=2015-09-13T13:00Z&end=2015-09-13T17:00Z", &got)
	if strings.Contains(body, "SECRET") {
		t.Fatalf("the answer shows the file's content:\n%s", body)
	}
	var times []string
	for _, u := range got.Unreadable {
		times = append(times, u["time"])
		if !strings.Contains(u["error"], "slot state unreadable") || !strings.Contains(u["error"], filepath.Join(day, u["time"][11:])) ||
			!strings.Contains(u["error"], "rerun or kill") {
			t.Errorf("unreadable %s: %q; want what, which file and the way out", u["time"], u["error"])
		}
	}
	if d := cmp.Diff([]string{"2015-09-13T15:00:00.000Z", "2015-09-13T13:00:00.000Z"}, times); d != "" {
		t.Errorf("unreadable slots, newest first (-want +got):\n%s\n%s", d, body)
	}
	var listed []string
	for _, sl := range got.Slots {
		listed = append(listed, fmt.Sprint(sl["time"]))
	}
	if d := cmp.Diff([]string{"2015-09-13T16:00:00.000Z", "2015-09-13T14:00:00.000Z"}, listed); d != "" {
		t.Errorf("slots (-want +got):\n%s", d)
	}
	// Once rerun, the slot is back among the slots.
	s.do(200, "POST", "/rerun?id=wc&time=2015-09-13T13:00Z", nil)
	var after api.WorkflowSlots
	s.do(200, "GET", "/workflow-slots?id=wc&start=2015-09-13T13:00Z&end=2015-09-13T14:00Z", &after)
	if len(after.Slots) != 1 || after.Slots[0].Status != slot.Waiting || strings.Contains(s.do(200, "GET", "/workflow-slots?id=wc&start=2015-09-13T13:00Z&end=2015-09-13T14:00Z", nil), "unreadable") {
		t.Errorf("after a rerun: %+v, want the slot WAITING and nothing unreadable", after)
	}
}

// TestWorkflowSlotsFailsOnAReadError: a read of a slot of the range that
// fails (an I/O error, the database server gone) fails GET
// /workflow-slots with a 500 and its code, not a 200 with the slot left out
// of a list that looks complete. Real engine and state database.
func TestWorkflowSlotsFailsOnAReadError(t *testing.T) {
	dir := t.TempDir()
	db, err := statedb.OpenWith(filepath.Join(dir, "db"), statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	wfDir := filepath.Join(dir, "workflows")
	w := newWorkflow("wc", fixture.HourlyCron, time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC), workflow.Trigger{Type: workflow.TriggerAlways}, 0)
	fixture.Write(t, wfDir, fixture.Project("p", w))
	bad := slot.ID{Workflow: "wc", Time: time.Date(2015, 9, 13, 14, 0, 0, 0, time.UTC)}
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: faultstore.EIO{DB: db, Bad: bad},
		Services: map[string]external.Service{workflow.ServiceCommand: &jobs{}}, Logger: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2015, 9, 13, 16, 30, 0, 0, time.UTC)
	h := api.New(eng, api.Options{Now: func() time.Time { return now }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/workflow-slots?id=wc&start=2015-09-13T13:00Z&end=2015-09-13T17:00Z", nil))
	api.CheckAnswer(t, "GET", "/workflow-slots", rec)
	var e struct{ Error, Code string }
	if err := json.Unmarshal(rec.Body.Bytes(), &e); rec.Code != 500 || err != nil || e.Code != "internal" {
		t.Fatalf("GET /workflow-slots with a slot that cannot be read: %d %s; want 500, code internal", rec.Code, rec.Body)
	}
}
