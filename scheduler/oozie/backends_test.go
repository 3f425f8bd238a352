package oozie_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/oozietest"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
)

// backend is an Oozie the client's protocol cases run against: the fake
// (internal/ooziefake) or the real server (internal/testenv/oozietest).
// Every case runs on both, so each difference between them shows up as a
// failure of one of the two (docs/oozie.md lists those found).
type backend struct {
	url, user string
	// touchApp is an application that succeeds; waitApp one that runs
	// until killed; missingApp a path with no workflow.xml.
	touchApp, waitApp, missingApp string
	// props are what the applications need besides the path.
	props map[string]string
}

func fakeBackend(t *testing.T) backend {
	f := startFake(t)
	b := backend{
		url: f.URL, user: "celos",
		touchApp: "hdfs://nn:8020/apps/touch", waitApp: "hdfs://nn:8020/apps/wait", missingApp: "hdfs://nn:8020/apps/missing",
	}
	f.SetCheckApp(func(p string) error {
		if p == b.touchApp || p == b.waitApp {
			return nil
		}
		return errors.New("no workflow.xml")
	})
	f.SetPlan(func(conf map[string]string) []string {
		if conf["oozie.wf.application.path"] == b.waitApp {
			return []string{ooziefake.Running} // until killed
		}
		return []string{ooziefake.Running, ooziefake.Succeeded}
	})
	return b
}

func realBackend(t *testing.T) backend {
	env := oozietest.Shared(t)
	c := env.HDFS
	hdfstest.WriteFile(t, c.Client(), "/backends/touch/workflow.xml", realApps["touch"])
	hdfstest.WriteFile(t, c.Client(), "/backends/wait/workflow.xml", realApps["wait"])
	return backend{
		url: env.Oozie.URL(), user: c.User(),
		touchApp: c.URL("/backends/touch"), waitApp: c.URL("/backends/wait"), missingApp: c.URL("/backends/missing"),
		props: map[string]string{"nameNode": c.URL(""), "outputDir": "/backends/out", "releaseDir": t.TempDir()},
	}
}

// forBoth runs f as the subtests fake and real.
func forBoth(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("fake", func(t *testing.T) { f(t, fakeBackend(t)) })
	t.Run("real", func(t *testing.T) { f(t, realBackend(t)) })
}

func (b backend) client(t *testing.T) *oozie.Client {
	return newClient(t, b.url, oozie.WithAuth(oozie.SimpleAuth{User: b.user}))
}

func (b backend) conf(app, name string) map[string]string {
	conf := map[string]string{"user.name": b.user, "oozie.wf.application.path": app, "celosWorkflowName": name, "hour": "07"}
	for k, v := range b.props {
		conf[k] = v
	}
	return conf
}

// waitFinal polls JobInfo until the job is final (or want, if given).
func waitFinal(t *testing.T, c *oozie.Client, id string, want ...string) *oozie.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := c.JobInfo(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(want, j.Status) || (len(want) == 0 && slices.Contains([]string{"SUCCEEDED", "KILLED", "FAILED"}, j.Status)) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after 60 s", id, j.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oozieErr is what the protocol promises of an error: the HTTP status and
// Oozie's error code.
type oozieErr struct {
	Status int
	Code   string
}

func asOozieErr(t *testing.T, err error) oozieErr {
	t.Helper()
	var oe *oozie.Error
	if !errors.As(err, &oe) {
		t.Fatalf("error %v is not an *oozie.Error", err)
	}
	return oozieErr{oe.Status, oe.Code}
}

var jobIDPattern = regexp.MustCompile(`^\d{7}-\d{15}-oozie-[A-Za-z0-9_.-]+-W$`)

func TestBackendsVersions(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		c := b.client(t)
		vs, err := c.Versions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{0, 1, 2}, vs); diff != "" {
			t.Errorf("versions (-want +got):\n%s", diff)
		}
		if v, err := c.Version(context.Background()); err != nil || v != "v2" {
			t.Errorf("Version() = %q, %v, want v2", v, err)
		}
	})
}

// TestBackendsSubmitInfo: a submitted job's info has the id format, the
// appName from the workflow (${celosWorkflowName}), the user, the app
// path, the configuration as submitted and dates; no jobType (Oozie 5.2.1
// sends none for workflow jobs, although v2 documents it).
func TestBackendsSubmitInfo(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := b.client(t)
		conf := b.conf(b.touchApp, "backends-info@2015-09-12T07:00Z")
		id, err := c.Submit(ctx, conf)
		if err != nil {
			t.Fatal(err)
		}
		if !jobIDPattern.MatchString(id) {
			t.Errorf("job id %q does not have Oozie's format", id)
		}
		j := waitFinal(t, c, id)
		got, err := oozie.ParseConfiguration([]byte(j.Conf))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range conf {
			if got[k] != v {
				t.Errorf("conf %s = %q, want %q", k, got[k], v)
			}
		}
		type summary struct {
			ID, AppName, AppPath, User, Status, JobType string
			Created, ConsoleHasID                       bool
		}
		want := summary{ID: id, AppName: "backends-info@2015-09-12T07:00Z", AppPath: b.touchApp, User: b.user, Status: "SUCCEEDED", JobType: "", Created: true, ConsoleHasID: true}
		gotS := summary{ID: j.ID, AppName: j.AppName, AppPath: j.AppPath, User: j.User, Status: j.Status, JobType: j.JobType,
			Created: !j.CreatedTime.IsZero() && time.Since(j.CreatedTime.Time) < time.Hour, ConsoleHasID: strings.Contains(j.ConsoleURL, id)}
		if diff := cmp.Diff(want, gotS); diff != "" {
			t.Errorf("job info (-want +got):\n%s", diff)
		}
	})
}

// TestBackendsUserOverride: the authenticated user (?user.name) overrides
// user.name in the configuration.
func TestBackendsUserOverride(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		c := b.client(t)
		conf := b.conf(b.touchApp, "backends-user@2015-09-12T07:00Z")
		conf["user.name"] = "mallory"
		id, err := c.Submit(context.Background(), conf)
		if err != nil {
			t.Fatal(err)
		}
		j := waitFinal(t, c, id)
		got, _ := oozie.ParseConfiguration([]byte(j.Conf))
		if j.User != b.user || got["user.name"] != b.user {
			t.Errorf("job user %q, conf user.name %q, want the authenticated %q", j.User, got["user.name"], b.user)
		}
	})
}

// TestBackendsErrors: the errors celos meets, as status and error code.
func TestBackendsErrors(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := b.client(t)
		const unknown = "0000099-150708104607239-oozie-oozi-W"
		_, err := c.JobInfo(ctx, unknown)
		got := map[string]oozieErr{"info unknown job": asOozieErr(t, err)}
		var oe *oozie.Error
		if errors.As(err, &oe) && oe.Message != "Job does not exist ["+unknown+"]" {
			t.Errorf("unknown job message %q, want Job does not exist [%s] (the code once, in Code)", oe.Message, unknown)
		}
		_, err = c.Submit(ctx, b.conf(b.missingApp, "backends-missing@2015-09-12T07:00Z"))
		got["submit missing app"] = asOozieErr(t, err)
		conf := b.conf(b.touchApp, "x")
		delete(conf, "oozie.wf.application.path")
		_, err = c.Submit(ctx, conf)
		got["submit no app path"] = asOozieErr(t, err)
		err = c.Kill(ctx, unknown)
		got["kill unknown job"] = asOozieErr(t, err)
		want := map[string]oozieErr{
			"info unknown job":   {400, "E0604"},
			"submit missing app": {400, "E0307"}, // not E0505: Oozie 5 tries its fluent job API
			"submit no app path": {400, "E0307"}, // not E0405, likewise
			"kill unknown job":   {400, "E0605"}, // not E0604
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("errors (-want +got):\n%s", diff)
		}
	})
}

// TestBackendsKill: a running job is KILLED; a kill of a finished job
// answers 200.
func TestBackendsKill(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := b.client(t)
		id, err := c.Submit(ctx, b.conf(b.waitApp, "backends-kill@2015-09-12T07:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		waitFinal(t, c, id, "RUNNING")
		if err := c.Kill(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitFinal(t, c, id, "KILLED")
		if err := c.Kill(ctx, id); err != nil {
			t.Errorf("kill of a KILLED job: %v", err)
		}
		done, err := c.Submit(ctx, b.conf(b.touchApp, "backends-killdone@2015-09-12T07:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		waitFinal(t, c, done, "SUCCEEDED")
		if err := c.Kill(ctx, done); err != nil {
			t.Errorf("kill of a SUCCEEDED job: %v", err)
		}
		if j := waitFinal(t, c, done); j.Status != "SUCCEEDED" {
			t.Errorf("a killed SUCCEEDED job is %s", j.Status)
		}
	})
}

// TestBackendsJobsFilter: the crash-recovery lookup by name finds the job
// (names hold '@' and ':'), and an unknown name finds nothing.
func TestBackendsJobsFilter(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		c := b.client(t)
		name := "backends-filter@2015-09-12T07:00Z"
		id, err := c.Submit(ctx, b.conf(b.touchApp, name))
		if err != nil {
			t.Fatal(err)
		}
		waitFinal(t, c, id)
		jobs, err := c.Jobs(ctx, oozie.Filter{Name: name}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
			if j.AppName != name || j.Status != "SUCCEEDED" || j.CreatedTime.IsZero() {
				t.Errorf("listed job %+v", j)
			}
		}
		if diff := cmp.Diff([]string{id}, ids); diff != "" {
			t.Errorf("jobs named %s (-want +got):\n%s", name, diff)
		}
		jobs, err = c.Jobs(ctx, oozie.Filter{Name: "backends-nothing@2015-09-12T07:00Z", User: b.user}, 10)
		if err != nil || len(jobs) != 0 {
			t.Errorf("jobs of an unknown name: %v, %v", jobs, err)
		}
	})
}

// TestBackendsAttempts: Service.Attempts lists every job of a slot, oldest
// first, with the status, times and console URL each backend gives; a job
// of another slot is not one.
func TestBackendsAttempts(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		props := b.conf(b.touchApp, "")
		delete(props, "celosWorkflowName")
		w := newWorkflow(b.url, props)
		w.ID = "backends-attempts"
		s := oozie.NewService(nil, nil)
		id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 12, 7, 0, 0, 0, time.UTC)}
		c := b.client(t)
		var ids []string
		for _, at := range []time.Time{id.Time, id.Time, id.Time.Add(time.Hour)} {
			jid, err := s.Submit(ctx, w, slot.ID{Workflow: w.ID, Time: at})
			if err != nil {
				t.Fatal(err)
			}
			waitFinal(t, c, jid)
			ids = append(ids, jid)
		}
		got, err := s.Attempts(ctx, w, id)
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []string
		for _, a := range got {
			gotIDs = append(gotIDs, a.ExternalID)
			if a.Status != "SUCCEEDED" || !a.Success || a.Running || a.Submitted.IsZero() || a.Ended.Before(a.Started) {
				t.Errorf("attempt %+v", a)
			}
		}
		if diff := cmp.Diff(ids[:2], gotIDs); diff != "" {
			t.Errorf("attempts of %s (-want +got):\n%s", id, diff)
		}
	})
}

// TestBackendsRawProtocol: requests celos's client never sends, compared
// as status and error code, to keep the fake honest for other clients.
func TestBackendsRawProtocol(t *testing.T) {
	forBoth(t, func(t *testing.T, b backend) {
		c := b.client(t)
		id, err := c.Submit(context.Background(), b.conf(b.touchApp, "backends-raw@2015-09-12T07:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		waitFinal(t, c, id)
		u := "?user.name=" + b.user
		cases := []struct{ name, method, path, ctype string }{
			{"v1 show=status", http.MethodGet, "/v1/job/" + id + u + "&show=status", ""},
			{"v2 show=status", http.MethodGet, "/v2/job/" + id + u + "&show=status", ""},
			{"bad action", http.MethodPut, "/v2/job/" + id + u + "&action=explode", ""},
			{"no action", http.MethodPut, "/v2/job/" + id + u, ""},
			{"bad filter", http.MethodGet, "/v2/jobs" + u + "&jobtype=wf&filter=colour%3Dred", ""},
			{"json body", http.MethodPost, "/v2/jobs" + u + "&action=start", "application/json"},
			{"admin status", http.MethodGet, "/v2/admin/status" + u, ""},
		}
		got := map[string]string{}
		for _, k := range cases {
			req, _ := http.NewRequest(k.method, b.url+k.path, strings.NewReader("{}"))
			if k.ctype != "" {
				req.Header.Set("Content-Type", k.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			s := resp.Status[:3] + " " + resp.Header.Get("oozie-error-code")
			if resp.StatusCode == http.StatusOK && len(body) > 0 {
				s += " " + strings.TrimSpace(string(body))
			}
			got[k.name] = s
		}
		want := map[string]string{
			"v1 show=status": "400 E0302",
			"v2 show=status": `200  {"status":"SUCCEEDED"}`,
			"bad action":     "400 E0303",
			"no action":      "400 E0305",
			"bad filter":     "400 E0420",
			"json body":      "400 E0300",
			"admin status":   `200  {"systemMode":"NORMAL"}`,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("raw protocol (-want +got):\n%s", diff)
		}
	})
}
