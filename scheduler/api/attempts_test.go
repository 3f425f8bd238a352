package api_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// TestSlotAttempts: GET /slot-attempts lists every run of a slot on the
// real engine and command service: a first attempt that failed (exit 3)
// and its retry that succeeded, while the slot state keeps only the last.
func TestSlotAttempts(t *testing.T) {
	dir := t.TempDir()
	wfDir := filepath.Join(dir, "workflows")
	os.Mkdir(wfDir, 0o755)
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cmd, err := command.New(filepath.Join(dir, "jobs"), command.Options{Logger: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd.Wait(ctx)
	})
	start := time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC)
	marker := filepath.Join(dir, "marker")
	w := newWorkflow("flaky", "0 0 * * * ?", start, workflow.Trigger{Type: workflow.TriggerAlways}, 1)
	w.ExternalService = workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"sh", "-c", `[ -e "` + marker + `" ] || { touch "` + marker + `"; exit 3; }`}}
	writeProject(t, wfDir, "p", w)
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, DB: db, Services: map[string]external.Service{workflow.ServiceCommand: cmd}, Logger: slogDiscard()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2015, 9, 13, 13, 30, 0, 0, time.UTC)
	s := &realServer{t: t, h: api.New(eng, api.Options{Now: func() time.Time { return now }, Attempts: cmd}), wf: wfDir, db: db}
	deadline := time.Now().Add(30 * time.Second)
	for s.stepStatus("flaky", "2015-09-13T13:00Z") != "SUCCESS/1" {
		if time.Now().After(deadline) {
			t.Fatalf("flaky@13:00 is %s, want SUCCESS/1", s.status("flaky", "2015-09-13T13:00Z"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	var got api.SlotAttempts
	s.do(200, "GET", "/slot-attempts?id=flaky&time=2015-09-13T13:00Z", &got)
	if len(got.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2: %+v", len(got.Attempts), got.Attempts)
	}
	a, b := got.Attempts[0], got.Attempts[1]
	if a.Status != "exit 3" || a.ExitCode == nil || *a.ExitCode != 3 || a.Success || !a.HasLog {
		t.Errorf("first attempt: %+v", a)
	}
	if b.Status != "exit 0" || !b.Success || got.Slot.ExternalID == nil || *got.Slot.ExternalID != b.ExternalID {
		t.Errorf("second attempt %+v, slot %+v", b, got.Slot)
	}
	// Unknown workflows, times not in the schedule and slots before the
	// workflow's start are 404; a bad time is 400.
	s.do(404, "GET", "/slot-attempts?id=flaky&time=2015-09-13T12:00Z", nil)
	s.do(404, "GET", "/slot-attempts?id=nope&time=2015-09-13T13:00Z", nil)
	s.do(404, "GET", "/slot-attempts?id=flaky&time=2015-09-13T13:07Z", nil)
	s.do(400, "GET", "/slot-attempts?id=flaky&time=later", nil)

	// Without a lister the route says so.
	none := &realServer{t: t, h: api.New(eng, api.Options{Now: func() time.Time { return now }})}
	none.do(501, "GET", "/slot-attempts?id=flaky&time=2015-09-13T13:00Z", nil)
}

// stepStatus steps once at the slot's hour and returns its STATUS/retries.
func (s *realServer) stepStatus(id, at string) string {
	s.t.Helper()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest("POST", "/scheduler?time="+url.QueryEscape("2015-09-13T13:30Z"), nil))
	if rec.Code != 200 {
		s.t.Fatalf("step: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest("GET", "/slot-state?id="+id+"&time="+at, nil))
	if rec.Code != 200 {
		return "no record"
	}
	return s.status(id, at)
}
