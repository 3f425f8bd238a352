package oozie_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

func newWorkflow(url string, props map[string]string) *workflow.Workflow {
	return &workflow.Workflow{
		ID:              "wordcount",
		ExternalService: workflow.ExternalService{Type: workflow.ServiceOozie, URL: url, Properties: props},
	}
}

func TestPrettyTime(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC), "2015-09-12T20:00Z"},
		{time.Date(2015, 9, 12, 12, 30, 1, 0, time.UTC), "2015-09-12T12:30:01Z"},
		{time.Date(2015, 9, 12, 12, 30, 0, int(time.Millisecond), time.UTC), "2015-09-12T12:30:00.001Z"},
		{time.Date(2015, 9, 12, 22, 0, 0, 0, time.FixedZone("x", 2*3600)), "2015-09-12T20:00Z"},
	} {
		if got := oozie.PrettyTime(tc.t); got != tc.want {
			t.Errorf("PrettyTime(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestProperties(t *testing.T) {
	d := &defaults.Defaults{OozieProperties: map[string]string{
		"user.name": "celos", "nameNode": "hdfs://default", "queue": "q-${year}",
	}}
	s := oozie.NewService(d, nil)
	w := newWorkflow("", map[string]string{
		"nameNode":                  "hdfs://own",
		"oozie.wf.application.path": "/apps/wc/${year}/${month}/${day}T${hour}${minute}${second}",
		"year":                      "overridden by celos",
		"celosWorkflowName":         "overridden by celos",
	})
	id := slot.ID{Workflow: "wordcount", Time: time.Date(2015, 9, 2, 7, 5, 0, 0, time.UTC)}
	got := s.Properties(w, id)
	want := map[string]string{
		"user.name": "celos", "nameNode": "hdfs://own", "queue": "q-2015",
		"oozie.wf.application.path": "/apps/wc/2015/09/02T070500",
		"year":                      "2015", "month": "09", "day": "02", "hour": "07", "minute": "05", "second": "00",
		"celosWorkflowName": "wordcount@2015-09-02T07:05Z",
	}
	if len(got) != len(want) {
		t.Errorf("properties %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// The defaults are not modified.
	if d.OozieProperties["queue"] != "q-${year}" {
		t.Error("Properties modified the installation defaults")
	}
}

func TestURL(t *testing.T) {
	s := oozie.NewService(&defaults.Defaults{Oozie: "http://default:11000/oozie"}, nil)
	if u, _ := s.URL(newWorkflow("http://own:11000/oozie", nil)); u != "http://own:11000/oozie" {
		t.Errorf("own URL: %q", u)
	}
	if u, _ := s.URL(newWorkflow("", nil)); u != "http://default:11000/oozie" {
		t.Errorf("default URL: %q", u)
	}
	_, err := oozie.NewService(nil, nil).Submit(context.Background(), newWorkflow("", nil), slot.ID{Workflow: "wordcount"})
	if err == nil || !strings.Contains(err.Error(), "CELOS_DEFAULT_OOZIE") {
		t.Errorf("no URL at all: %v", err)
	}
}

func TestServiceLifecycle(t *testing.T) {
	ctx := context.Background()
	f := startFake(t, ooziefake.RequireUser())
	f.SetPlan(func(conf map[string]string) []string {
		if conf["hour"] == "01" {
			return []string{ooziefake.Prep, ooziefake.Running, ooziefake.Failed}
		}
		return []string{ooziefake.Running, ooziefake.Succeeded}
	})
	s := oozie.NewService(&defaults.Defaults{Oozie: f.URL}, nil)
	w := newWorkflow("", map[string]string{"user.name": "bob", "oozie.wf.application.path": "/app"})
	t0 := time.Date(2015, 9, 12, 0, 0, 0, 0, time.UTC)

	ok, err := s.Submit(ctx, w, slot.ID{Workflow: w.ID, Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	if job, _ := f.Job(ok); job.Conf["celosWorkflowName"] != "wordcount@2015-09-12T00:00Z" || job.User != "bob" {
		t.Errorf("submitted conf %v user %q", job.Conf, job.User)
	}
	for i, want := range []external.Status{{Running: true, Detail: "RUNNING"}, {Success: true, Detail: "SUCCEEDED"}, {Success: true, Detail: "SUCCEEDED"}} {
		got, err := s.Status(ctx, w, ok)
		if err != nil || got != want {
			t.Errorf("status %d = %+v, %v; want %+v", i, got, err, want)
		}
	}

	bad, err := s.Submit(ctx, w, slot.ID{Workflow: w.ID, Time: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var last external.Status
	for i := 0; i < 3; i++ {
		if last, err = s.Status(ctx, w, bad); err != nil {
			t.Fatal(err)
		}
	}
	if last.Running || last.Success || !strings.HasPrefix(last.Detail, "FAILED (action main: JA018") {
		t.Errorf("failed job: %+v", last)
	}

	// Kill a running job, and a finished one (not an error).
	running, _ := s.Submit(ctx, w, slot.ID{Workflow: w.ID, Time: t0.Add(2 * time.Hour)})
	if err := s.Kill(ctx, w, running); err != nil {
		t.Fatal(err)
	}
	if j, _ := f.Job(running); !j.Killed || j.Status != ooziefake.Killed {
		t.Errorf("kill did not reach Oozie: %+v", j)
	}
	if err := s.Kill(ctx, w, ok); err != nil {
		t.Errorf("kill of a finished job: %v", err)
	}
	if st, _ := s.Status(ctx, w, running); st.Running || st.Success || st.Detail != "KILLED" {
		t.Errorf("killed job status %+v", st)
	}
}

func TestServiceOutageIsUnavailable(t *testing.T) {
	ctx := context.Background()
	f := startFake(t)
	s := oozie.NewService(nil, nil, oozie.WithCallTimeout(time.Second))
	w := newWorkflow(f.URL, map[string]string{"user.name": "u", "oozie.wf.application.path": "/app"})
	id, err := s.Submit(ctx, w, slot.ID{Workflow: w.ID, Time: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	f.SetMode(ooziefake.Error500)
	if _, err := s.Status(ctx, w, id); !errors.Is(err, external.ErrUnavailable) {
		t.Errorf("status on 500: %v", err)
	}
	_, err = s.Submit(ctx, w, slot.ID{Workflow: w.ID, Time: time.Unix(3600, 0)})
	if !errors.Is(err, external.ErrUnavailable) || !strings.Contains(err.Error(), "wordcount@1970-01-01T01:00:00.000Z") {
		t.Errorf("submit on 500 must be unavailable and name the slot: %v", err)
	}
	f.SetMode(ooziefake.Normal)
	f.Down()
	if err := s.Kill(ctx, w, id); !errors.Is(err, external.ErrUnavailable) {
		t.Errorf("kill while down: %v", err)
	}
}

func TestMapStatus(t *testing.T) {
	for status, want := range map[string]external.Status{
		"PREP": {Running: true}, "RUNNING": {Running: true}, "SUSPENDED": {Running: true},
		"SUCCEEDED": {Success: true}, "KILLED": {}, "FAILED": {},
	} {
		got, err := oozie.MapStatus(status)
		want.Detail = status
		if err != nil || got != want {
			t.Errorf("MapStatus(%s) = %+v, %v", status, got, err)
		}
	}
	if _, err := oozie.MapStatus("DONEWITHERROR"); err == nil {
		t.Error("an unknown status must be an error")
	}
}

// TestRecoverInFlight: a submission whose process died while the request
// was at Oozie may still be being made when the next process looks for
// it. Until the intent is older than the call timeout, Recover does not
// say "no job" (the engine would submit a second one) but "unavailable",
// naming when it will; a job Oozie makes late is then found, and after
// the timeout "no job" is final.
func TestRecoverInFlight(t *testing.T) {
	ctx := context.Background()
	f := startFake(t)
	s := oozie.NewService(&defaults.Defaults{Oozie: f.URL}, nil, oozie.WithCallTimeout(20*time.Second))
	w := newWorkflow("", map[string]string{"user.name": "u", "oozie.wf.application.path": "/app"})
	id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)}
	intent := time.Now()
	_, found, err := s.Recover(ctx, w, id, intent)
	if found || !errors.Is(err, external.ErrUnavailable) || !strings.Contains(err.Error(), "may still be in flight") {
		t.Fatalf("no job yet, intent just written: found=%v err=%v; want unavailable, in flight", found, err)
	}
	jobID, err := s.Submit(ctx, w, id) // Oozie makes the job late
	if err != nil {
		t.Fatal(err)
	}
	if got, found, err := s.Recover(ctx, w, id, intent); err != nil || !found || got != jobID {
		t.Fatalf("the late job: Recover = %q, %v, %v; want %q", got, found, err, jobID)
	}
	other := slot.ID{Workflow: w.ID, Time: id.Time.Add(time.Hour)}
	if _, found, err := s.Recover(ctx, w, other, intent.Add(-21*time.Second)); err != nil || found {
		t.Fatalf("intent older than the call timeout: found=%v err=%v; want a final no", found, err)
	}
}

func TestRecover(t *testing.T) {
	ctx := context.Background()
	f := startFake(t)
	s := oozie.NewService(&defaults.Defaults{Oozie: f.URL}, nil)
	w := newWorkflow("", map[string]string{"user.name": "u", "oozie.wf.application.path": "/app"})
	id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)}

	intent := time.Now()
	// An intent older than the call timeout: nothing can be in flight.
	if _, found, err := s.Recover(ctx, w, id, intent.Add(-oozie.DefaultTimeout-time.Second)); err != nil || found {
		t.Fatalf("nothing submitted yet: found=%v err=%v", found, err)
	}
	jobID, err := s.Submit(ctx, w, id)
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := s.Recover(ctx, w, id, intent)
	if err != nil || !found || got != jobID {
		t.Fatalf("Recover = %q, %v, %v; want %q", got, found, err, jobID)
	}
	// A job from before the intent (an earlier run of a rerun slot) is not adopted.
	if _, found, _ := s.Recover(ctx, w, id, time.Now().Add(time.Hour)); found {
		t.Error("adopted a job created before the intent")
	}
	// Another slot's job is not adopted.
	other := slot.ID{Workflow: w.ID, Time: id.Time.Add(time.Hour)}
	if _, found, _ := s.Recover(ctx, w, other, intent.Add(-time.Hour)); found {
		t.Error("adopted another slot's job")
	}

	// A workflow.xml with a fixed name: found by reading the user's newest jobs.
	f.SetAppName(func(map[string]string) string { return "wordcount-wf" })
	other2 := slot.ID{Workflow: w.ID, Time: id.Time.Add(2 * time.Hour)}
	jobID2, err := s.Submit(ctx, w, other2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, w, other); err != nil { // a newer job of another slot
		t.Fatal(err)
	}
	if got, found, err := s.Recover(ctx, w, other2, intent); err != nil || !found || got != jobID2 {
		t.Errorf("Recover by conf = %q, %v, %v; want %q", got, found, err, jobID2)
	}

	f.SetMode(ooziefake.Error500)
	if _, _, err := s.Recover(ctx, w, other, intent); !errors.Is(err, external.ErrUnavailable) {
		t.Errorf("Recover on 500: %v", err)
	}
}

// TestSubmitNoEffect: a submission whose request never reached Oozie (the
// connection refused) or that Oozie refused in safe mode says so (external.ErrNoEffect: the engine then
// forgets its submit intent, nothing can be in flight); one whose
// connection broke after the request was sent does not.
func TestSubmitNoEffect(t *testing.T) {
	ctx := context.Background()
	w := newWorkflow("", map[string]string{"user.name": "u", "oozie.wf.application.path": "/app"})
	id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/oozie"
	ln.Close()
	_, err = oozie.NewService(&defaults.Defaults{Oozie: closed}, nil).Submit(ctx, w, id)
	if !errors.Is(err, external.ErrUnavailable) || !errors.Is(err, external.ErrNoEffect) {
		t.Fatalf("submit to a closed port: %v; want unavailable and not sent", err)
	}

	f := startFake(t)
	f.SetMode(ooziefake.SafeMode) // Oozie's own refusal, before it acts
	_, err = oozie.NewService(&defaults.Defaults{Oozie: f.URL}, nil).Submit(ctx, w, id)
	if !errors.Is(err, external.ErrUnavailable) || !errors.Is(err, external.ErrNoEffect) {
		t.Fatalf("submit in safe mode: %v; want unavailable and no effect", err)
	}
	f.SetMode(ooziefake.Normal)
	// Versions answer; the submit's connection is cut once its request
	// has been read.
	cut := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/versions") {
			resp, err := http.Get(f.URL + "/versions")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			rw.Header().Set("Content-Type", "application/json")
			io.Copy(rw, resp.Body)
			return
		}
		io.Copy(io.Discard, r.Body)
		conn, _, err := rw.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer cut.Close()
	_, err = oozie.NewService(&defaults.Defaults{Oozie: cut.URL + "/oozie"}, nil).Submit(ctx, w, id)
	if !errors.Is(err, external.ErrUnavailable) || errors.Is(err, external.ErrNoEffect) {
		t.Fatalf("submit cut after the request: %v; want unavailable, not 'not sent'", err)
	}
}

// TestSubmitNotSentAfterItsIntent: Recover waits for a submission still in
// flight only until its intent's time plus the call timeout, so a
// submission made (or resumed, after its process was stopped) later than
// that must not reach Oozie: it is not sent and fails with no effect. A
// process stopped between that check and the write is caught as the body
// is written.
func TestSubmitNotSentAfterItsIntent(t *testing.T) {
	ctx := context.Background()
	w := newWorkflow("", map[string]string{"user.name": "u", "oozie.wf.application.path": "/app"})
	id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)}
	f := startFake(t)
	const timeout = 2 * time.Second
	svc := oozie.NewService(&defaults.Defaults{Oozie: f.URL}, nil, oozie.WithCallTimeout(timeout))

	_, err := svc.Submit(external.WithIntent(ctx, time.Now().Add(-timeout-time.Second)), w, id)
	if !errors.Is(err, external.ErrNoEffect) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("submit under an intent older than the call timeout: %v; want not sent, no effect", err)
	}
	if n := len(f.Jobs()); n != 0 {
		t.Fatalf("Oozie has %d jobs of a submission whose intent had expired", n)
	}
	if _, err := svc.Submit(external.WithIntent(ctx, time.Now()), w, id); err != nil {
		t.Fatalf("submit under a fresh intent: %v", err)
	}
	if n := len(f.Jobs()); n != 1 {
		t.Fatalf("Oozie has %d jobs after a submission in time, want 1", n)
	}

	// Held up after the check, before the request is written (the
	// transport stalls as a stopped process would): the body is not sent.
	stall := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost {
			time.Sleep(timeout * 3 / 4) // past the intent's time, within the call's
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	held := oozie.NewService(&defaults.Defaults{Oozie: f.URL}, stall, oozie.WithCallTimeout(timeout))
	_, err = held.Submit(external.WithIntent(ctx, time.Now().Add(-timeout/2)), w, id)
	if !errors.Is(err, external.ErrNoEffect) || !strings.Contains(err.Error(), "before its body was sent") {
		t.Fatalf("submit held up past its intent's time before the write: %v; want abandoned before the body, no effect", err)
	}
	if n := len(f.Jobs()); n != 1 {
		t.Fatalf("Oozie has %d jobs, want still 1: the held-up submission reached it", n)
	}
}
