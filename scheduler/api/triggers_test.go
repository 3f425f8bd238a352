package api_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

func i64(n int64) *int64 { return &n }

// TestRealEngineNewTriggers: through the API on the engine, an ingestion
// job's PUT /register makes an event-triggered slot READY in the next
// step; /trigger-status of a dataVolume trigger on file: shows the count
// and bytes it saw (validated against openapi.json).
func TestRealEngineNewTriggers(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	in := t.TempDir()
	day := filepath.Join(in, "20150913")
	os.MkdirAll(day, 0o755)
	os.WriteFile(filepath.Join(day, "part-0"), make([]byte, 700), 0o644)
	os.WriteFile(filepath.Join(day, "part-1"), make([]byte, 300), 0o644)
	start := time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC)
	fixture.WriteProject(t, s.wf, "p",
		newWorkflow("ev", "0 0 * * * ?", start, workflow.Trigger{Type: workflow.TriggerEvent, Bucket: "ingest", Key: "clicks-${year}${month}${day}T${hour}"}, 0),
		newWorkflow("dv", "0 0 * * * ?", start, workflow.Trigger{Type: workflow.TriggerDataVolume, FS: "file:///",
			Path: filepath.ToSlash(in) + "/${year}${month}${day}/part-*", MinFiles: i64(1), MinBytes: i64(2000)}, 0),
	)
	s.step("2015-09-13T13:40Z")
	s.do(404, "GET", "/slot-state?id=ev&time=2015-09-13T13:00Z", nil) // WAITING, not stored
	var st trigger.Status
	s.do(200, "GET", "/trigger-status?id=ev&time=2015-09-13T13:00Z", &st)
	if st.Type != trigger.TypeEvent || st.Ready || st.Description != "Register ingest/clicks-20150913T13 does not exist" {
		t.Errorf("event status %+v", st)
	}

	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest("PUT", "/register?bucket=ingest&key=clicks-20150913T13", strings.NewReader(`{"files": 2}`)))
	if rec.Code != 200 {
		t.Fatalf("PUT register: %d %s", rec.Code, rec.Body)
	}
	s.step("2015-09-13T13:40Z")
	if got := s.status("ev", "2015-09-13T13:00Z"); got != "READY/0" {
		t.Errorf("ev after the register: %s", got)
	}

	body := s.do(200, "GET", "/trigger-status?id=dv&time=2015-09-13T13:00Z", &st)
	if st.Type != trigger.TypeDataVolume || st.Ready || st.Files == nil || *st.Files != 2 || *st.Bytes != 1000 {
		t.Errorf("dataVolume status %s", body)
	}
	if !strings.Contains(body, `"files":2`) && !strings.Contains(body, `"files": 2`) {
		t.Errorf("no files count in %s", body)
	}
	s.do(404, "GET", "/slot-state?id=dv&time=2015-09-13T13:00Z", nil) // 1000 of 2000 bytes: still WAITING
}
