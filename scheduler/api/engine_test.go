package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// jobs is an external service that finishes every job at once: a job of
// workflow "flaky" fails, every other succeeds.
type jobs struct {
	mu     sync.Mutex
	killed []string
	// killErr, when set, is what Kill answers (the service failing).
	killErr error
}

func (*jobs) Submit(_ context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	return "job-" + id.String(), nil
}

func (*jobs) Status(_ context.Context, w *workflow.Workflow, x string) (external.Status, error) {
	return external.Status{Success: w.ID != "flaky"}, nil
}

func (j *jobs) Kill(_ context.Context, _ *workflow.Workflow, x string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.killErr != nil {
		return j.killErr
	}
	j.killed = append(j.killed, x)
	return nil
}

// newWorkflow is fixture.Hourly with the schedule, start, trigger and
// retries a test varies.
func newWorkflow(id, cron string, start time.Time, trig workflow.Trigger, retries int) workflow.Workflow {
	w := fixture.Hourly(id)
	w.Schedule.Cron, w.StartTime, w.Trigger, w.MaxRetryCount = cron, start, trig, retries
	return w
}

// realServer is the API on a real engine and state database in a temp dir.
type realServer struct {
	t    testing.TB
	h    *api.Handler
	jobs *jobs
	wf   string
	db   *statedb.DB
}

func newRealServer(t testing.TB, now time.Time, states ...slot.State) *realServer {
	t.Helper()
	dir := t.TempDir()
	// Stored states are written as files in Celos's layout before the
	// database opens (as an existing installation's would be).
	for _, st := range states {
		t := st.ID.Time.UTC()
		d := filepath.Join(dir, "db", "state", st.ID.Workflow, t.Format("2006-01-02"))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, t.Format("15:04:05.000")+"Z"), statedb.EncodeState(st), 0o644)
	}
	wf := filepath.Join(dir, "workflows")
	if err := os.Mkdir(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	j := &jobs{}
	eng, err := engine.New(engine.Options{
		WorkflowsDir: wf, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: j},
		Logger: slogDiscard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &realServer{t: t, h: api.New(eng, api.Options{Now: func() time.Time { return now }}), jobs: j, wf: wf, db: db}
}

func (s *realServer) do(code int, method, target string, out any) string {
	s.t.Helper()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	u, _ := url.Parse(target)
	api.CheckAnswer(s.t, method, u.Path, rec)
	if rec.Code != code {
		s.t.Fatalf("%s %s: %d, want %d: %s", method, target, rec.Code, code, rec.Body)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			s.t.Fatal(err)
		}
	}
	return rec.Body.String()
}

func (s *realServer) step(at string) {
	s.t.Helper()
	s.do(200, "POST", "/scheduler?time="+at, nil)
}

// stepUntil steps at `at` until the slot is in state want (STATUS/retries),
// at most 10 steps (each step moves a slot at most once).
func (s *realServer) stepUntil(at, id, slotTime, want string) {
	s.t.Helper()
	got := ""
	for range 10 {
		s.step(at)
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, httptest.NewRequest("GET", "/slot-state?id="+id+"&time="+slotTime, nil))
		if rec.Code == 200 {
			if got = s.status(id, slotTime); got == want {
				return
			}
		}
	}
	s.t.Fatalf("%s@%s is %s after 10 steps, want %s", id, slotTime, got, want)
}

func (s *realServer) status(id, at string) string {
	s.t.Helper()
	var sl api.Slot
	s.do(200, "GET", "/slot-state?id="+id+"&time="+at, &sl)
	return fmt.Sprintf("%s/%d", sl.Status, sl.RetryCount)
}

// TestRealEngine runs the API on the engine: steps with simulated time,
// a success dependency, retries, kill, rerun (also outside the window),
// pause, registers, and a workflows file that does not load.
func TestRealEngine(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	start := time.Date(2015, 9, 13, 12, 0, 0, 0, time.UTC)
	fixture.WriteProject(t, s.wf, "demo",
		newWorkflow("up", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 0),
		newWorkflow("down", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: "up"}, 0),
		newWorkflow("flaky", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 1),
	)
	if err := os.WriteFile(filepath.Join(s.wf, "truncated.json"), []byte(`{"format": "celos.dev/workflows/v1", "proj`), 0o644); err != nil {
		t.Fatal(err)
	}

	at := "2015-09-13T13:40Z"
	var list api.WorkflowList
	s.step(at)
	s.do(200, "GET", "/workflow-list", &list)
	if strings.Join(list.IDs, ",") != "down,flaky,up" || len(list.LoadErrors) != 1 || list.LoadErrors[0].File != "truncated.json" {
		t.Fatalf("workflow-list %+v", list)
	}
	if got := s.status("up", "2015-09-13T13:00Z"); got != "READY/0" {
		t.Errorf("up after step 1: %s", got)
	}
	s.do(404, "GET", "/slot-state?id=down&time=2015-09-13T13:00Z", nil) // still WAITING, not stored
	s.stepUntil(at, "down", "2015-09-13T13:00Z", "SUCCESS/0")
	s.stepUntil(at, "flaky", "2015-09-13T13:00Z", "FAILURE/1")
	for _, c := range []struct{ id, want string }{{"up", "SUCCESS/0"}, {"down", "SUCCESS/0"}, {"flaky", "FAILURE/1"}} {
		if got := s.status(c.id, "2015-09-13T13:00Z"); got != c.want {
			t.Errorf("%s@13:00 is %s, want %s", c.id, got, c.want)
		}
	}

	var ws api.WorkflowSlots
	s.do(200, "GET", "/workflow-slots?id=up", &ws)
	if len(ws.Slots) != 2 || ws.Slots[0].Time != "2015-09-13T13:00:00.000Z" || ws.Slots[0].ExternalID == nil {
		t.Errorf("workflow-slots %+v", ws.Slots)
	}
	tree := s.do(200, "GET", "/trigger-status?id=down&time=2015-09-13T13:00Z", nil)
	if !strings.Contains(tree, "SuccessTrigger") {
		t.Errorf("trigger-status %s", tree)
	}

	// Rerun and kill.
	s.do(404, "POST", "/rerun?id=up&time=2015-09-13T13:30Z", nil)
	s.do(404, "POST", "/rerun?id=nope&time=2015-09-13T13:00Z", nil)
	var sl api.Slot
	s.do(200, "POST", "/rerun?id=flaky&time=2015-09-13T13:00Z", &sl)
	if sl.Status != slot.Waiting || sl.RetryCount != 0 {
		t.Errorf("after rerun %+v", sl)
	}
	s.do(400, "POST", "/rerun?id=flaky&time=2015-09-13T13:00Z", nil) // WAITING is not final
	s.step(at)                                                       // READY
	s.step(at)                                                       // RUNNING
	s.do(200, "POST", "/kill?id=flaky&time=2015-09-13T13:00Z", &sl)
	if sl.Status != slot.Killed || len(s.jobs.killed) != 1 {
		t.Errorf("after kill %+v, killed %v", sl, s.jobs.killed)
	}
	s.do(400, "POST", "/kill?id=flaky&time=2015-09-13T13:00Z", nil)

	// A rerun of a slot far outside the window is stepped; one before
	// startTime is refused (TestRealEngineRerunNotDue).
	fixture.WriteProject(t, s.wf, "old", newWorkflow("old", fixture.HourlyCron, time.Date(2015, 7, 1, 0, 0, 0, 0, time.UTC), workflow.Trigger{Type: workflow.TriggerAlways}, 0))
	s.step(at)
	s.do(200, "POST", "/rerun?id=old&time=2015-08-01T00:00Z", nil)
	s.stepUntil(at, "old", "2015-08-01T00:00Z", "SUCCESS/0")
	s.do(400, "POST", "/rerun?id=up&time=2015-08-01T00:00Z", nil)

	// Pause: the workflow is skipped.
	s.do(200, "POST", "/pause?id=up&paused=true", nil)
	s.do(200, "GET", "/workflow-slots?id=up", &ws)
	if !ws.Paused {
		t.Error("not paused")
	}
	s.step("2015-09-13T14:10Z")
	s.do(404, "GET", "/slot-state?id=up&time=2015-09-13T14:00Z", nil)
	s.do(200, "POST", "/pause?id=up&paused=false", nil)
	s.step("2015-09-13T14:10Z")
	if got := s.status("up", "2015-09-13T14:00Z"); got != "READY/0" {
		t.Errorf("after unpause %s", got)
	}

	// Registers.
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest("PUT", "/register?bucket=b&key=k", strings.NewReader(`{"n": 1}`)))
	if rec.Code != 200 {
		t.Fatalf("PUT register: %d %s", rec.Code, rec.Body)
	}
	if got := s.do(200, "GET", "/register?bucket=b&key=k", nil); !strings.Contains(got, `"n": 1`) {
		t.Errorf("register %s", got)
	}
	s.do(404, "GET", "/register?bucket=b&key=other", nil)
	s.do(400, "GET", "/register?bucket=..&key=k", nil)
	var keys api.RegisterKeys
	s.do(200, "GET", "/list-register-keys?bucket=b", &keys)
	if strings.Join(keys.Keys, ",") != "k" {
		t.Errorf("keys %v", keys.Keys)
	}
	s.do(200, "DELETE", "/register?bucket=b&key=k", nil)
	s.do(404, "GET", "/register?bucket=b&key=k", nil)

	// The definition, and the unknown.
	var w workflow.Workflow
	s.do(200, "GET", "/workflow?id=down", &w)
	if w.Trigger.Type != workflow.TriggerSuccess {
		t.Errorf("definition %+v", w)
	}
	for _, target := range []string{"/workflow?id=nope", "/workflow-slots?id=nope", "/trigger-status?id=nope&time=2015-09-13T13:00Z"} {
		s.do(404, "GET", target, nil)
	}
	s.do(200, "POST", "/clear-cache", nil)
	s.do(200, "GET", "/workflow-list", &list)
	if len(list.IDs) != 4 {
		t.Errorf("after clear-cache %v", list.IDs)
	}

}

// TestRealEngineClearCache: POST /clear-cache rereads the workflows files
// at once, without a step: a project written since is listed after it,
// not before.
func TestRealEngineClearCache(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	start := time.Date(2015, 9, 13, 12, 0, 0, 0, time.UTC)
	fixture.WriteProject(t, s.wf, "first", newWorkflow("first", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 0))
	s.step("2015-09-13T13:40Z") // load it
	fixture.WriteProject(t, s.wf, "late", newWorkflow("late", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 0))
	var list api.WorkflowList
	s.do(200, "GET", "/workflow-list", &list)
	if diff := cmp.Diff([]string{"first"}, list.IDs); diff != "" {
		t.Fatalf("a workflows file was read before clear-cache or a step (-want +got):\n%s", diff)
	}
	s.do(200, "POST", "/clear-cache", nil)
	s.do(200, "GET", "/workflow-list", &list)
	if diff := cmp.Diff([]string{"first", "late"}, list.IDs); diff != "" {
		t.Errorf("after clear-cache, the new workflows file is not loaded (-want +got):\n%s", diff)
	}
}

// BenchmarkWorkflowSlotsMinutely measures GET /workflow-slots for one
// minutely workflow over a full 7-day window (10,080 slots, every one
// stored as SUCCESS), through the handler and the real engine and state
// database.
func BenchmarkWorkflowSlotsMinutely(b *testing.B) {
	now := time.Date(2026, 1, 8, 0, 0, 0, 0, time.UTC)
	start := now.Add(-scheduler.Window)
	var states []slot.State
	for t := start; t.Before(now); t = t.Add(time.Minute) {
		id := slot.ID{Workflow: "minutely", Time: t}
		states = append(states, slot.State{ID: id, Status: slot.Success, ExternalID: "0004806-150911205802478-oozie-oozi-W"})
	}
	s := newRealServer(b, now, states...)
	fixture.WriteProject(b, s.wf, "bench", newWorkflow("minutely", fixture.MinutelyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 0))
	s.do(200, "POST", "/clear-cache", nil)               // load the workflows file
	s.do(200, "GET", "/workflow-slots?id=minutely", nil) // and the state index, once, as a running server has
	req := httptest.NewRequest("GET", "/workflow-slots?id=minutely", nil)
	var size int
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	b.StopTimer()
	var ws api.WorkflowSlots
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if err := json.Unmarshal(rec.Body.Bytes(), &ws); err != nil || len(ws.Slots) != 10080 {
		b.Fatalf("%d slots, %v", len(ws.Slots), err)
	}
	b.ReportMetric(float64(size), "bytes/answer")
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestConcurrentRequests reads while steps, reruns and pauses run (go test
// -race finds unsynchronized access between the handlers and the engine).
// Every answer is checked: the reads, and each POST /pause (made while
// steps run) answers 200 with the flag it set, repeated pauses included.
func TestConcurrentRequests(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	start := time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)
	fixture.WriteProject(t, s.wf, "demo",
		newWorkflow("a", "0 */5 * * * ?", start, workflow.Trigger{Type: workflow.TriggerAlways}, 0),
		newWorkflow("b", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: "a"}, 0))
	s.step("2015-09-13T13:39Z") // load the workflows
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, target := range []string{"/workflow-slots?id=a", "/workflow-slots?id=b", "/workflow-list", "/metrics", "/trigger-status?id=b&time=2015-09-13T12:00Z"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec := httptest.NewRecorder()
				s.h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
				if rec.Code != 200 {
					t.Errorf("GET %s: %d %s", target, rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	// Pauses run beside the steps until the steps are done (and at least 8
	// of them): true, true, false, false, ... so that setting the flag it
	// already has is answered as well.
	var last atomic.Value
	pausesDone := make(chan int)
	go func() {
		n := 0
		defer func() { pausesDone <- n }()
		for ; ; n++ {
			select {
			case <-stop:
				if n >= 8 {
					return
				}
			default:
			}
			paused := n%4 < 2
			rec := httptest.NewRecorder()
			target := fmt.Sprintf("/pause?id=b&paused=%v", paused)
			s.h.ServeHTTP(rec, httptest.NewRequest("POST", target, nil))
			if rec.Code != 200 {
				t.Errorf("POST %s (pause %d): %d %s", target, n, rec.Code, rec.Body)
				return
			}
			var got api.PauseResult
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Errorf("POST %s (pause %d): %v: %s", target, n, err, rec.Body)
				return
			}
			if diff := cmp.Diff(api.PauseResult{ID: "b", Paused: paused}, got); diff != "" {
				t.Errorf("POST %s (pause %d) answer (-want +got):\n%s", target, n, diff)
				return
			}
			last.Store(paused)
		}
	}()
	for i := range 8 {
		s.step(fmt.Sprintf("2015-09-13T13:%02dZ", 40+i))
	}
	close(stop)
	wg.Wait()
	if n := <-pausesDone; n < 8 && !t.Failed() {
		t.Errorf("only %d pauses made", n)
	}
	var ws api.WorkflowSlots
	s.do(200, "GET", "/workflow-slots?id=b", &ws)
	if want, _ := last.Load().(bool); ws.Paused != want {
		t.Errorf("after the pauses, /workflow-slots says paused=%v, the last POST /pause set %v", ws.Paused, want)
	}
}

// TestRealEngineUnschedulable: a workflow whose dependent schedule names a
// workflow that is not loaded answers 409 (not 500) on the calls that need
// its slots, and the step goes on with the others.
func TestRealEngineUnschedulable(t *testing.T) {
	now := time.Date(2015, 9, 13, 14, 0, 0, 0, time.UTC)
	s := newRealServer(t, now)
	start := time.Date(2015, 9, 13, 10, 0, 0, 0, time.UTC)
	orphan := newWorkflow("orphan", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 0)
	orphan.Schedule = workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: "gone"}
	fixture.WriteProject(t, s.wf, "p", newWorkflow("fine", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 0), orphan)
	s.step("2015-09-13T14:00Z")
	body := s.do(409, "GET", "/workflow-slots?id=orphan", nil)
	if !strings.Contains(body, "gone") {
		t.Errorf("409 body does not name the missing workflow: %s", body)
	}
	s.do(409, "POST", "/rerun?id=orphan&time=2015-09-13T12:00Z", nil)
	var fine struct {
		Slots []struct{ Status string } `json:"slots"`
	}
	s.do(200, "GET", "/workflow-slots?id=fine", &fine)
	if len(fine.Slots) != 4 || fine.Slots[len(fine.Slots)-1].Status != "READY" {
		t.Errorf("the other workflow did not step: %+v", fine.Slots)
	}
}

// TestRealEngineRerunNotDue: a rerun of a slot the schedule has not reached
// (after the server's clock) or that the workflow does not have (before its
// startTime, or not a schedule time) is refused, one slot at a time, with
// 400 (404 for a time not in the schedule, as before) and a message saying
// why; the refused slot is not marked, the next steps do not run it, and a
// slot not due yet still runs at its time. GET /rerun answers the same
// without changing anything (the dry run of celos rerun).
func TestRealEngineRerunNotDue(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)) // the server's clock
	start := time.Date(2015, 9, 13, 12, 0, 0, 0, time.UTC)
	fixture.WriteProject(t, s.wf, "demo", newWorkflow("up", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerAlways}, 0))
	s.stepUntil("2015-09-13T13:40Z", "up", "2015-09-13T13:00Z", "SUCCESS/0")

	refused := []struct {
		time string
		code int
		why  string
	}{
		{"2015-09-13T14:00Z", 400, "not due yet"},                                  // the next slot
		{"2015-09-13T13:40:00.001Z", 404, "not a slot of the workflow's schedule"}, // after now and no slot
		{"2016-01-01T00:00Z", 400, "not due yet"},
		{"2015-09-13T11:00Z", 400, "before the workflow's startTime 2015-09-13T12:00:00.000Z"},
		{"2015-08-01T00:00Z", 400, "startTime"},
		{"2015-09-13T13:30Z", 404, "not a slot of the workflow's schedule"},
	}
	for _, method := range []string{"POST", "GET"} {
		for _, r := range refused {
			var e struct{ Error string }
			s.do(r.code, method, "/rerun?id=up&time="+r.time, &e)
			if !strings.Contains(e.Error, r.why) || !strings.Contains(e.Error, "up@") {
				t.Errorf("%s /rerun of up@%s: %q, want it to name the slot and say %q", method, r.time, e.Error, r.why)
			}
		}
	}
	// Nothing was marked: the steps leave those slots alone, and the next
	// slot runs when its time comes.
	s.step("2015-09-13T13:40Z")
	s.step("2015-09-13T13:41Z")
	for _, at := range []string{"2015-09-13T14:00Z", "2016-01-01T00:00Z", "2015-09-13T11:00Z", "2015-08-01T00:00Z"} {
		s.do(404, "GET", "/slot-state?id=up&time="+at, nil)
	}
	s.stepUntil("2015-09-13T14:10Z", "up", "2015-09-13T14:00Z", "SUCCESS/0")

	// GET /rerun of a slot that can be rerun answers the slot as it is and
	// changes nothing; POST then reruns it.
	var sl api.Slot
	s.do(200, "GET", "/rerun?id=up&time=2015-09-13T13:00Z", &sl)
	if sl.Status != slot.Success || s.status("up", "2015-09-13T13:00Z") != "SUCCESS/0" {
		t.Errorf("GET /rerun: %+v, slot now %s; want SUCCESS, unchanged", sl, s.status("up", "2015-09-13T13:00Z"))
	}
	s.do(200, "POST", "/rerun?id=up&time=2015-09-13T13:00Z", &sl)
	if sl.Status != slot.Waiting {
		t.Errorf("POST /rerun: %+v", sl)
	}
	var e struct{ Error string }
	s.do(400, "GET", "/rerun?id=up&time=2015-09-13T13:00Z", &e) // WAITING now: not final
	if !strings.Contains(e.Error, "illegal") {
		t.Errorf("GET /rerun of a WAITING slot: %q", e.Error)
	}
	// A slot at exactly the server's clock is due.
	fixture.WriteProject(t, s.wf, "demo", newWorkflow("up", "0 */10 * * * ?", start, workflow.Trigger{Type: workflow.TriggerAlways}, 0))
	s.step("2015-09-13T13:40Z")
	s.do(200, "POST", "/rerun?id=up&time=2015-09-13T13:40Z", nil)
}

// TestSlotStateOfACorruptRecord: a slot whose state file does not parse is
// answered 409 by /slot-state and /slot-attempts (documented in the OpenAPI description) with what and why,
// not 500, and without the file's content; a rerun rewrites it.
func TestSlotStateOfACorruptRecord(t *testing.T) {
	now := time.Date(2015, 9, 13, 15, 30, 0, 0, time.UTC)
	s := newRealServer(t, now)
	w := newWorkflow("wc", fixture.HourlyCron, time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC), workflow.Trigger{Type: workflow.TriggerAlways}, 0)
	fixture.WriteProject(t, s.wf, "p", w)
	s.step("2015-09-13T15:30Z")
	tearSlot(t, s, "wc", "13:00:00.000Z")
	s.db.Reload()
	body := s.do(409, "GET", "/slot-state?id=wc&time=2015-09-13T13:00Z", nil)
	if !strings.Contains(body, "unreadable") || !strings.Contains(body, "rewrites it") || strings.Contains(body, "SECRET") {
		t.Fatalf("answer %s: want what and why and the way out, without the content", body)
	}
	// Its attempts: the same 409, not "not in the schedule".
	if body := s.do(409, "GET", "/slot-attempts?id=wc&time=2015-09-13T13:00Z", nil); !strings.Contains(body, "slot_unreadable") || strings.Contains(body, "SECRET") {
		t.Fatalf("GET /slot-attempts: %s: want code slot_unreadable, without the content", body)
	}
	s.do(200, "POST", "/rerun?id=wc&time=2015-09-13T13:00Z", nil)
	if got := s.status("wc", "2015-09-13T13:00Z"); got != "WAITING/0" {
		t.Fatalf("after a rerun: %s, want WAITING", got)
	}
}

// tearSlot writes a state file of workflow wf on 13 September 2015 at
// name (15:04:05.000Z) that does not parse, holding SECRET-CONTENT (which
// no answer may show), and returns its day directory.
func tearSlot(t *testing.T, s *realServer, wf, name string) string {
	t.Helper()
	day := filepath.Join(s.db.Dir(), "state", wf, "2015-09-13")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(day, name), []byte(`{"status":"SECRET-CONTENT`), 0o644); err != nil {
		t.Fatal(err)
	}
	return day
}
