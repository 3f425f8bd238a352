package faults

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
)

// TestMinIntervalSurvivesServerKill9: a real `celos server` submits slot
// 00:00 at 03:00:30 (its data came late) and is killed with SIGKILL; the
// restarted server counts that submission at 03:00:30, not at the slot
// time: slot 01:00 stays READY, held by minInterval 4h, until 07:00:30
// (the slot-time count let it run at 04:30, 00:00 being outside the
// 4-hour look-back).
func TestMinIntervalSurvivesServerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts celos server processes")
	}
	dir := t.TempDir()
	w := fixture.Hourly("spaced")
	w.StartTime = time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)
	w.SchedulingStrategy.Concurrency = 5
	w.Constraints = &workflow.Constraints{MinIntervalSeconds: 4 * 3600, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	fixture.Write(t, filepath.Join(dir, "wf"), fixture.Project("spaced", w))
	at := func(hms string) time.Time {
		t.Helper()
		tm, err := time.Parse(time.RFC3339, "2015-09-13T"+hms+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	step := func(s *server, hms string) {
		t.Helper()
		if code, body := s.post("/scheduler", url.Values{"time": {at(hms).Format(time.RFC3339)}}); code != 200 {
			t.Fatalf("POST /scheduler at %s: %d %s", hms, code, body)
		}
	}
	status := func(s *server, hms string) string {
		t.Helper()
		return s.slots("spaced", at("00:00:00"), at("08:00:00"))[at(hms).Format("2006-01-02T15:04:05.000Z")].Status
	}

	s := startServer(t, dir)
	step(s, "03:00:00") // 00:00, 01:00, 02:00 READY
	step(s, "03:00:30") // 00:00 submitted
	waitFor(t, 2*time.Minute, "00:00 SUCCESS", func() bool {
		step(s, "03:10:00")
		return status(s, "00:00:00") == "SUCCESS"
	})
	if st := status(s, "01:00:00"); st != "READY" {
		t.Fatalf("01:00 is %s before the restart, want READY (held)", st)
	}
	s.kill9()

	s = startServer(t, dir)
	step(s, "04:30:00")
	step(s, "07:00:29")
	if st := status(s, "01:00:00"); st != "READY" {
		t.Fatalf("after a restart 01:00 is %s within 4h of the submission at 03:00:30, want READY\n%s", st, s.stderr)
	}
	resp, err := http.Get(s.URL + "/trigger-status?" + url.Values{"id": {"spaced"}, "time": {at("01:00:00").Format(time.RFC3339)}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	var ts struct {
		Held *struct{ Op, Reason string } `json:"held"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ts)
	resp.Body.Close()
	if err != nil || ts.Held == nil || !strings.Contains(ts.Held.Reason, "the last submission was at 2015-09-13T03:00:30.000Z, the next may be at 2015-09-13T07:00:30.000Z") {
		t.Errorf("trigger-status of 01:00: held %+v (%v), want minInterval's from the submission at 03:00:30", ts.Held, err)
	}
	step(s, "07:00:30")
	if st := status(s, "01:00:00"); st != "RUNNING" && st != "SUCCESS" {
		t.Fatalf("01:00 is %s once minInterval passed, want submitted", st)
	}
	s.stop()
}
