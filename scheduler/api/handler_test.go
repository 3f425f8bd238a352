package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/metrics"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

var t0 = time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)

// tester sends requests to a handler and checks every answer against
// openapi.json.
type tester struct {
	t   *testing.T
	h   *Handler
	doc doc
}

func newTester(t *testing.T, svc scheduler.Service) *tester {
	t.Helper()
	return &tester{t: t, h: New(svc, Options{Now: func() time.Time { return t0 }, Version: "v1.2.3"}), doc: loadDoc(t)}
}

func (ts *tester) do(method, target, body string) *httptest.ResponseRecorder {
	ts.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, req)
	u, _ := url.Parse(target)
	checkResponse(ts.t, ts.doc, method, u.Path, rec)
	return rec
}

// want sends a request, checks the status and decodes a JSON answer into out.
func (ts *tester) want(code int, method, target string, out any) *httptest.ResponseRecorder {
	ts.t.Helper()
	rec := ts.do(method, target, "")
	if rec.Code != code {
		ts.t.Fatalf("%s %s: status %d, want %d; body %s", method, target, rec.Code, code, rec.Body)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			ts.t.Fatalf("%s %s: %v", method, target, err)
		}
	}
	return rec
}

func errMsg(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	return e.Error
}

func TestWorkflowList(t *testing.T) {
	f := newFake("b", "a")
	f.loadErrs = []scheduler.LoadError{{File: "bad.json", Error: "unsupported format version"}}
	ts := newTester(t, f)
	var got WorkflowList
	ts.want(200, "GET", "/workflow-list", &got)
	if strings.Join(got.IDs, ",") != "a,b" || len(got.LoadErrors) != 1 {
		t.Errorf("got %+v", got)
	}
	var empty WorkflowList
	newTester(t, newFake()).want(200, "GET", "/workflow-list", &empty)
	if empty.IDs == nil || empty.LoadErrors == nil {
		t.Errorf("empty lists must be [] not null: %+v", empty)
	}
}

func TestWorkflowSlots(t *testing.T) {
	f := newFake("wf")
	f.workflows["wf"].URL = "https://wiki/wf"
	f.workflows["wf"].Contacts = []workflow.Contact{{Name: "Ann"}}
	ts := newTester(t, f)
	sid := slot.ID{Workflow: "wf", Time: t0.Truncate(time.Hour)}
	f.states[sid] = slot.State{ID: sid, Status: slot.Running, ExternalID: "0004806-oozie-W", RetryCount: 1}

	var got WorkflowSlots
	ts.want(200, "GET", "/workflow-slots?id=wf", &got)
	if len(got.Slots) != 168 {
		t.Fatalf("default window: %d slots, want 168", len(got.Slots))
	}
	first := got.Slots[0]
	if first.Time != "2015-09-13T13:00:00.000Z" || first.Status != slot.Running || *first.ExternalID != "0004806-oozie-W" || first.RetryCount != 1 {
		t.Errorf("newest slot %+v", first)
	}
	if got.Slots[1].ExternalID != nil || got.Slots[167].Time != "2015-09-06T14:00:00.000Z" {
		t.Errorf("slots not newest first or WAITING not synthesized: %+v ... %+v", got.Slots[1], got.Slots[167])
	}
	if got.Info.URL == nil || *got.Info.URL != "https://wiki/wf" || *got.Info.Contacts[0].Name != "Ann" || got.Info.Contacts[0].Email != nil {
		t.Errorf("info %+v", got.Info)
	}

	ts.want(200, "GET", "/workflow-slots?id=wf&start=2015-09-13T10:00Z&end=2015-09-13T12:00Z", &got)
	if len(got.Slots) != 2 || got.Slots[0].Time != "2015-09-13T11:00:00.000Z" {
		t.Errorf("start inclusive, end exclusive: %+v", got.Slots)
	}
	ts.want(200, "GET", "/workflow-slots?id=wf&start=2015-09-13T12:00Z&end=2015-09-13T12:00Z", &got)
	if len(got.Slots) != 0 || got.Slots == nil {
		t.Errorf("start = end: %+v", got.Slots)
	}
	// A start before the workflow's startTime is honoured when given.
	f.workflows["wf"].StartTime = t0.Add(-3 * time.Hour)
	ts.want(200, "GET", "/workflow-slots?id=wf", &got)
	if len(got.Slots) != 3 {
		t.Errorf("default start is max(end-168h, startTime): %d slots", len(got.Slots))
	}

	if err := f.SetPaused(nil, "wf", true); err != nil {
		t.Fatal(err)
	}
	ts.want(200, "GET", "/workflow-slots?id=wf", &got)
	if !got.Paused {
		t.Error("paused not reported")
	}

	rec := ts.want(400, "GET", "/workflow-slots?id=wf&start=2015-09-01T00:00Z&end=2015-09-13T00:00Z", nil)
	if m := errMsg(t, rec); m != "Time interval between start and end is limited to: 168 hours" {
		t.Errorf("message %q", m)
	}
	ts.want(200, "GET", "/workflow-slots?id=wf&start=2015-09-06T00:00Z&end=2015-09-13T00:00Z", nil)
	rec = ts.want(404, "GET", "/workflow-slots?id=nope", nil)
	if m := errMsg(t, rec); !strings.Contains(m, "nope") {
		t.Errorf("404 message %q does not name the workflow", m)
	}
	rec = ts.want(400, "GET", "/workflow-slots", nil)
	if m := errMsg(t, rec); m != "id parameter missing." {
		t.Errorf("message %q", m)
	}
	ts.want(400, "GET", "/workflow-slots?id=wf&id=wf", nil)
	ts.want(400, "GET", "/workflow-slots?id=wf&end=yesterday", nil)
	ts.want(400, "GET", "/workflow-slots?id=../etc", nil)
	ts.want(400, "GET", "/workflow-slots?id=wf&start=2015-09-13T10:00Z&start=2015-09-13T11:00Z", nil)

	f.orphans = map[string]bool{"wf": true}
	rec = ts.want(409, "GET", "/workflow-slots?id=wf", nil)
	if m := errMsg(t, rec); !strings.Contains(m, `workflow "gone" not found`) {
		t.Errorf("409 message %q", m)
	}
}

func TestMethodsAndPaths(t *testing.T) {
	ts := newTester(t, newFake("wf"))
	rec := ts.want(405, "GET", "/scheduler", nil)
	if a := rec.Header().Get("Allow"); a != "POST" {
		t.Errorf("Allow %q", a)
	}
	rec = ts.want(405, "POST", "/register?bucket=b&key=k", nil)
	if a := rec.Header().Get("Allow"); a != "DELETE, GET, HEAD, PUT" {
		t.Errorf("Allow %q", a)
	}
	ts.want(405, "POST", "/workflow-list", nil)
	ts.want(404, "GET", "/", nil)
	ts.want(404, "GET", "/workflow-list/", nil)
}

func TestScheduler(t *testing.T) {
	f := newFake("a", "b")
	ts := newTester(t, f)
	var got StepResult
	ts.want(200, "POST", "/scheduler", &got)
	if got.Time != "2015-09-13T13:40:00.000Z" || len(f.steps) != 1 || !f.steps[0].Equal(t0) {
		t.Errorf("step at now: %+v, steps %v", got, f.steps)
	}
	ts.want(200, "POST", "/scheduler?time=2015-09-14T01:00%2B02:00&ids=a,%20b,", &got)
	if got.Time != "2015-09-13T23:00:00.000Z" || strings.Join(got.IDs, ",") != "a,b" {
		t.Errorf("time with offset and ids: %+v", got)
	}
	if got.UnknownIDs != nil {
		t.Errorf("known ids reported unknown: %+v", got)
	}
	got = StepResult{}
	ts.want(200, "POST", "/scheduler?ids=b,nope,a,zz", &got)
	if strings.Join(got.UnknownIDs, ",") != "nope,zz" {
		t.Errorf("unknown ids: %+v; want nope,zz", got)
	}
	ts.want(400, "POST", "/scheduler?time=13:40", nil)
	ts.want(400, "POST", "/scheduler?ids=a/b", nil)
	ts.want(400, "POST", "/scheduler?time=2015-09-13T13:40Z&time=2015-09-13T13:40Z", nil)
	f.stepErr = errors.New("db directory /x is not writable")
	var log bytes.Buffer
	ts.h = New(f, Options{Now: func() time.Time { return t0 }, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	rec := ts.want(500, "POST", "/scheduler", nil)
	checkInternal(t, rec, &log, "not writable", "/x")
}

// checkInternal checks a 500: code internal, a text that names neither
// the error (detail) nor a path, and a reference that finds the log line
// that has the detail.
func checkInternal(t *testing.T, rec *httptest.ResponseRecorder, log *bytes.Buffer, detail, path string) {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("500 body %q: %v", rec.Body, err)
	}
	if e.Code != "internal" || strings.Contains(e.Error, detail) || strings.Contains(e.Error, path) {
		t.Errorf("500 body %s: want code internal and neither %q nor %q", rec.Body, detail, path)
	}
	ref := regexp.MustCompile(`reference ([0-9a-f]{16})`).FindStringSubmatch(e.Error)
	if ref == nil {
		t.Fatalf("500 body %s names no reference", rec.Body)
	}
	var line string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "reference="+ref[1]) {
			line = l
		}
	}
	if !strings.Contains(line, detail) {
		t.Errorf("no log line with reference %s and %q:\n%s", ref[1], detail, log)
	}
}

func TestSlotStateAndTriggerStatus(t *testing.T) {
	f := newFake("wf")
	ts := newTester(t, f)
	ts.want(200, "POST", "/scheduler", nil)
	var s Slot
	ts.want(200, "GET", "/slot-state?id=wf&time=2015-09-13T13:00Z", &s)
	if s.Status != slot.Success || s.Time != "2015-09-13T13:00:00.000Z" {
		t.Errorf("slot %+v", s)
	}
	ts.want(404, "GET", "/slot-state?id=wf&time=2015-09-13T12:00Z", nil)
	ts.want(400, "GET", "/slot-state?id=wf", nil)

	rec := ts.want(200, "GET", "/trigger-status?id=wf&time=2015-09-13T13:00Z", nil)
	if !strings.Contains(rec.Body.String(), `"subStatuses": []`) {
		t.Errorf("leaf subStatuses must be []: %s", rec.Body)
	}
	ts.want(404, "GET", "/trigger-status?id=nope&time=2015-09-13T13:00Z", nil)
}

func TestRerunKillPause(t *testing.T) {
	f := newFake("wf")
	ts := newTester(t, f)
	ts.want(200, "POST", "/scheduler", nil) // 13:00 SUCCESS
	var s Slot
	// GET /rerun: what POST would do, changing nothing.
	ts.want(200, "GET", "/rerun?id=wf&time=2015-09-13T13:00Z", &s)
	if s.Status != slot.Success {
		t.Errorf("GET /rerun %+v, want the slot as it is", s)
	}
	ts.want(404, "GET", "/rerun?id=wf&time=2015-09-13T13:30Z", nil)
	ts.want(400, "GET", "/rerun?id=wf", nil)
	// A service that cannot check a rerun without making it: 501.
	plain := newTester(t, struct{ scheduler.Service }{f})
	plain.want(501, "GET", "/rerun?id=wf&time=2015-09-13T13:00Z", nil)
	ts.want(200, "POST", "/rerun?id=wf&time=2015-09-13T13:00Z", &s)
	if s.Status != slot.Waiting || s.RetryCount != 0 {
		t.Errorf("after rerun %+v", s)
	}
	rec := ts.want(400, "POST", "/rerun?id=wf&time=2015-09-13T13:00Z", nil)
	if !strings.Contains(errMsg(t, rec), "illegal") {
		t.Errorf("rerun of a WAITING slot: %s", rec.Body)
	}
	ts.want(404, "POST", "/rerun?id=wf&time=2015-09-13T13:30Z", nil)
	ts.want(404, "POST", "/rerun?id=nope&time=2015-09-13T13:00Z", nil)
	ts.want(400, "POST", "/rerun?id=wf", nil)
	ts.want(200, "POST", "/rerun?id=wf&time=2015-09-13T12:00Z", &s) // no record: only marked
	if s.Status != slot.Waiting {
		t.Errorf("rerun of a never-run slot %+v", s)
	}

	ts.want(200, "POST", "/kill?id=wf&time=2015-09-13T13:00Z", &s)
	if s.Status != slot.Killed {
		t.Errorf("after kill %+v", s)
	}
	ts.want(400, "POST", "/kill?id=wf&time=2015-09-13T13:00Z", nil)
	ts.want(404, "POST", "/kill?id=wf&time=2015-09-13T13:00:01Z", nil)

	var p PauseResult
	ts.want(200, "POST", "/pause?id=wf&paused=true", &p)
	if !p.Paused || !f.paused["wf"] {
		t.Errorf("pause %+v", p)
	}
	ts.want(200, "POST", "/pause?id=wf&paused=false", &p)
	if p.Paused || f.paused["wf"] {
		t.Errorf("unpause %+v", p)
	}
	ts.want(400, "POST", "/pause?id=wf&paused=yes", nil)
	ts.want(400, "POST", "/pause?id=wf", nil)
	ts.want(404, "POST", "/pause?id=nope&paused=true", nil)
}

func TestRegisters(t *testing.T) {
	f := newFake()
	ts := newTester(t, f)
	if rec := ts.do("PUT", "/register?bucket=b&key=k1", `{"a": [1, 2]}`); rec.Code != 200 {
		t.Fatalf("put: %d %s", rec.Code, rec.Body)
	}
	ts.do("PUT", "/register?bucket=b&key=k2", `"x"`)
	ts.do("PUT", "/register?bucket=b&key=other", `3`)
	rec := ts.want(200, "GET", "/register?bucket=b&key=k1", nil)
	if strings.TrimSpace(rec.Body.String()) != `{"a": [1, 2]}` {
		t.Errorf("get: %s", rec.Body)
	}
	ts.want(404, "GET", "/register?bucket=b&key=missing", nil)
	if rec := ts.do("PUT", "/register?bucket=b&key=k3", `{not json`); rec.Code != 400 {
		t.Errorf("bad JSON body: %d", rec.Code)
	}
	if rec := ts.do("PUT", "/register?bucket=b&key=k3", strings.Repeat(" ", MaxBodyBytes+1)+"1"); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(errMsg(t, rec), "limit") {
		t.Errorf("oversized body: %d %s", rec.Code, rec.Body)
	}
	if rec := ts.do("PUT", "/register?bucket=big&key=k", strings.Repeat(" ", MaxBodyBytes-1)+"1"); rec.Code != 200 {
		t.Errorf("body of exactly the limit: %d %s", rec.Code, rec.Body)
	}
	ts.want(400, "GET", "/register?bucket=b/../x&key=k", nil)
	var keys RegisterKeys
	ts.want(200, "GET", "/list-register-keys?bucket=b&prefix=k", &keys)
	if strings.Join(keys.Keys, ",") != "k1,k2" {
		t.Errorf("keys %v", keys.Keys)
	}
	ts.want(200, "DELETE", "/register?bucket=b&prefix=k", nil)
	ts.want(200, "DELETE", "/register?bucket=b&key=other", nil)
	ts.want(400, "DELETE", "/register?bucket=b", nil)
	ts.want(400, "DELETE", "/register?bucket=b&key=a&prefix=b", nil)
	ts.want(200, "GET", "/list-register-keys?bucket=b", &keys)
	if keys.Keys == nil || len(keys.Keys) != 0 {
		t.Errorf("keys after delete %v", keys.Keys)
	}
}

func TestWorkflowDefinitionAndMisc(t *testing.T) {
	ts := newTester(t, newFake("wf"))
	var w workflow.Workflow
	ts.want(200, "GET", "/workflow?id=wf", &w)
	if w.ID != "wf" || w.Schedule.Cron != fixture.HourlyCron {
		t.Errorf("definition %+v", w)
	}
	ts.want(404, "GET", "/workflow?id=nope", nil)
	ts.want(200, "POST", "/clear-cache", nil)
	ts.want(200, "GET", "/healthz", nil)
	rec := ts.want(200, "GET", "/version", nil)
	if rec.Body.String() != "v1.2.3\n" {
		t.Errorf("version %q", rec.Body)
	}
	rec = ts.want(200, "GET", "/openapi.json", nil)
	var d map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || d["openapi"] == nil {
		t.Errorf("openapi.json: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	f := newFake("a", "b")
	f.loadErrs = []scheduler.LoadError{{File: "x.json", Error: "bad"}}
	ts := newTester(t, f)
	ts.want(200, "POST", "/scheduler", nil)
	_ = f.SetPaused(nil, "b", true)
	ts.want(200, "POST", "/pause?id=b&paused=true", nil)
	rec := ts.want(200, "GET", "/metrics", nil)
	body := rec.Body.String()
	for _, want := range []string{
		"celos_step_duration_seconds_count 1",
		`celos_steps_total{result="ok"} 1`,
		`celos_slots{status="SUCCESS"} 2`,
		`celos_slots{status="WAITING"} 334`,
		`celos_workflows{paused="true"} 1`,
		"celos_workflow_load_errors 1",
		`celos_http_requests_total{code="200",method="POST",path="/scheduler"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, "\ngo_") == false {
		t.Error("no Go runtime metrics")
	}
}

func TestPanicIsJSON500(t *testing.T) {
	ts := newTester(t, panicky{newFake("wf")})
	var log bytes.Buffer
	ts.h = New(panicky{newFake("wf")}, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	rec := ts.do("GET", "/workflow-list", "")
	if rec.Code != 500 {
		t.Fatalf("status %d", rec.Code)
	}
	checkErrorBody(t, rec)
	checkInternal(t, rec, &log, "boom", "boom")
}

// failingCollector fails every gathering of the metrics.
type failingCollector struct{}

var failingDesc = prometheus.NewDesc("celos_test_failing", "fails", nil, nil)

func (failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- failingDesc }
func (failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(failingDesc, errors.New("read /proc/self/stat: secret detail"))
}

// TestMetricsFailureIsJSON500: when the metrics cannot be gathered,
// /metrics answers the API's 500 (JSON, code internal), not the
// Prometheus library's text.
func TestMetricsFailureIsJSON500(t *testing.T) {
	m := metrics.New()
	m.Registry().MustRegister(failingCollector{})
	var log bytes.Buffer
	ts := newTester(t, newFake("wf"))
	ts.h = New(newFake("wf"), Options{Metrics: m, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	rec := ts.do("GET", "/metrics", "")
	if rec.Code != 500 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	checkInternal(t, rec, &log, "secret detail", "/proc")
}

type panicky struct{ *fakeService }

func (panicky) WorkflowIDs() []string { panic("boom") }

func TestUndeclaredParameterPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("reading an undeclared parameter did not panic")
		}
	}()
	q, _ := parseQuery(&endpoint{}, "id=x")
	q.str("id")
}

var _ http.Handler = (*Handler)(nil)

// TestSlotsEncoding checks that the hand-written /workflow-slots encoding
// is byte for byte what encoding/json writes, with unreadable slots among
// the listed ones too (in the unreadable list, not in slots).
func TestSlotsEncoding(t *testing.T) {
	url := "https://wiki/x?a=<b>&c"
	name := "Zoë \"Z\""
	bad := scheduler.ListedSlot{State: slot.State{ID: slot.ID{Workflow: "w", Time: t0.Add(2 * time.Hour)}},
		Unreadable: fmt.Errorf("%w: w@...: corrupt state file /db/<x>: bad JSON", scheduler.ErrSlotUnreadable)}
	for _, ws := range []WorkflowSlots{
		{Info: WorkflowInfo{Contacts: []Contact{}}},
		{Info: WorkflowInfo{URL: &url, Contacts: []Contact{{Name: &name}}}, Paused: true},
	} {
		for _, states := range [][]scheduler.ListedSlot{
			nil,
			{{State: slot.State{ID: slot.ID{Workflow: "w", Time: t0}, Status: slot.Waiting}}},
			{
				{State: slot.State{ID: slot.ID{Workflow: "w", Time: t0.Add(time.Hour)}, Status: slot.Running, ExternalID: "0004806-150911205802478-oozie-oozi-W", RetryCount: 2}},
				{State: slot.State{ID: slot.ID{Workflow: "w", Time: t0}, Status: slot.Success, ExternalID: "w@2015-09-13T13:40:00.000Z<&>\"\\\u00e9\n"}},
			},
			{bad},
			{bad, {State: slot.State{ID: slot.ID{Workflow: "w", Time: t0.Add(time.Hour)}, Status: slot.Failure}}, bad,
				{State: slot.State{ID: slot.ID{Workflow: "w", Time: t0}, Status: slot.Success}}, bad},
		} {
			ws.Unreadable = nil
			want := ws
			want.Slots = []Slot{}
			for _, s := range states {
				if s.Unreadable != nil {
					ws.Unreadable = append(ws.Unreadable, UnreadableSlot{Time: slot.FormatTime(s.ID.Time), Error: s.Unreadable.Error()})
					continue
				}
				want.Slots = append(want.Slots, NewSlot(s.State))
			}
			want.Unreadable = ws.Unreadable
			wb, _ := json.MarshalIndent(want, "", "  ")
			got, err := ws.appendJSON(nil, states)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(wb)+"\n" {
				t.Errorf("got\n%s\nwant\n%s", got, wb)
			}
		}
	}
}
