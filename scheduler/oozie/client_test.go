package oozie_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/oozie"
)

func startFake(t *testing.T, opts ...ooziefake.Option) *ooziefake.Server {
	t.Helper()
	f, err := ooziefake.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func newClient(t *testing.T, url string, opts ...oozie.Option) *oozie.Client {
	t.Helper()
	c, err := oozie.NewClient(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var wfConf = map[string]string{
	"user.name":                 "celos",
	"oozie.wf.application.path": "hdfs://nn:8020/user/celos/app/wordcount/workflow.xml",
	"inputDir":                  "/in/<&>\"'",
}

func TestSubmitInfoKill(t *testing.T) {
	ctx := context.Background()
	f := startFake(t, ooziefake.RequireUser())
	c := newClient(t, f.URL, oozie.WithAuth(oozie.SimpleAuth{User: "alice"}))

	id, err := c.Submit(ctx, wfConf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(id, "-oozie-oozi-W") || len(id) < 30 {
		t.Errorf("job id %q is not in Oozie's format", id)
	}
	job, ok := f.Job(id)
	if !ok {
		t.Fatalf("fake has no job %s", id)
	}
	if job.Conf["inputDir"] != wfConf["inputDir"] {
		t.Errorf("inputDir arrived as %q, want %q (XML escaping)", job.Conf["inputDir"], wfConf["inputDir"])
	}
	if job.Conf["user.name"] != "alice" {
		t.Errorf("user.name = %q: the authenticated user must override the conf", job.Conf["user.name"])
	}
	reqs := f.Requests()
	var post ooziefake.Request
	for _, r := range reqs {
		if r.Method == http.MethodPost {
			post = r
		}
	}
	if post.Path != "/oozie/v2/jobs" || !strings.Contains(post.RawQuery, "action=start") || !strings.Contains(post.RawQuery, "user.name=alice") {
		t.Errorf("submit request = %+v", post)
	}
	if post.ContentType != "application/xml;charset=UTF-8" {
		t.Errorf("content type %q", post.ContentType)
	}

	info, err := c.JobInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != oozie.StatusRunning || info.ID != id || info.User != "alice" || info.CreatedTime.IsZero() {
		t.Errorf("info = %+v", info)
	}
	conf, err := info.ConfMap()
	if err != nil || conf["inputDir"] != wfConf["inputDir"] {
		t.Errorf("conf = %v, %v", conf, err)
	}

	if err := c.Kill(ctx, id); err != nil {
		t.Fatal(err)
	}
	if info, err = c.JobInfo(ctx, id); err != nil || info.Status != oozie.StatusKilled || info.EndTime.IsZero() {
		t.Fatalf("after kill: %+v, %v", info, err)
	}
	// Killing a finished job answers 200, as Oozie.
	if err := c.Kill(ctx, id); err != nil {
		t.Errorf("second kill: %v", err)
	}
}

func TestVersionFallsBackToV1(t *testing.T) {
	ctx := context.Background()
	f := startFake(t, ooziefake.WithVersions(0, 1))
	c := newClient(t, f.URL)
	v, err := c.Version(ctx)
	if err != nil || v != "v1" {
		t.Fatalf("Version = %q, %v; want v1", v, err)
	}
	if _, err := c.Submit(ctx, wfConf); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Requests() {
		if strings.HasPrefix(r.Path, "/oozie/v2") {
			t.Errorf("v2 path used against a v1 server: %+v", r)
		}
	}

	f0 := startFake(t, ooziefake.WithVersions(0))
	_, err = newClient(t, f0.URL).Submit(ctx, wfConf)
	if err == nil || !strings.Contains(err.Error(), "v1 or v2") {
		t.Errorf("v0-only server: %v", err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	f := startFake(t)
	c := newClient(t, f.URL)

	_, err := c.JobInfo(ctx, "0000042-000000000000000-oozie-oozi-W")
	var oe *oozie.Error
	if !errors.As(err, &oe) || oe.Status != 400 || oe.Code != "E0604" || !strings.Contains(oe.Message, "Job does not exist") {
		t.Fatalf("unknown job: %#v", err)
	}
	if errors.Is(err, external.ErrUnavailable) {
		t.Errorf("an unknown job is a verdict, not an outage: %v", err)
	}
	for _, want := range []string{"0000042-000000000000000-oozie-oozi-W", "E0604", "Job does not exist", f.URL} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	_, err = c.Submit(ctx, map[string]string{"user.name": "u"})
	if !errors.As(err, &oe) || oe.Code != "E0307" || errors.Is(err, external.ErrUnavailable) {
		t.Errorf("submit without app path: %v", err)
	}

	faults := []struct {
		name  string
		apply func()
		want  string
	}{
		{"500", func() { f.SetMode(ooziefake.Error500) }, "HTTP 500 E0603"},
		{"safe mode", func() { f.SetMode(ooziefake.SafeMode) }, "HTTP 503 E0002"},
		{"garbage", func() { f.SetMode(ooziefake.Garbage) }, "not JSON"},
		{"down", func() { f.Down() }, "unreachable"},
	}
	for _, tc := range faults {
		t.Run(tc.name, func(t *testing.T) {
			tc.apply()
			defer func() { f.SetMode(ooziefake.Normal); f.Up() }()
			_, err := c.Submit(ctx, wfConf)
			if !errors.Is(err, external.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("submit: %v; want ErrUnavailable and %q", err, tc.want)
			}
		})
	}
	// Up again: calls work.
	if _, err := c.Submit(ctx, wfConf); err != nil {
		t.Errorf("after the faults: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	f := startFake(t)
	c := newClient(t, f.URL, oozie.WithTimeout(200*time.Millisecond), oozie.WithVersion("v1"))
	// Job "x" does not exist: had the call waited for the slow answer it
	// would be Oozie's 400 E0604, not an outage. So ErrUnavailable with a
	// deadline as the cause shows that the timeout ended the call.
	f.SetDelay(5 * time.Second)
	_, err := c.JobInfo(context.Background(), "x")
	if !errors.Is(err, external.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow Oozie: %v; want ErrUnavailable caused by the 200ms timeout", err)
	}
	var oe *oozie.Error
	if errors.As(err, &oe) && oe.Code == "E0604" {
		t.Errorf("slow Oozie: the call waited for the answer: %v", err)
	}
	// The caller's context bounds the call too.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c2 := newClient(t, f.URL, oozie.WithTimeout(0), oozie.WithVersion("v1"))
	if _, err := c2.JobInfo(ctx, "x"); !errors.Is(err, external.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v; want ErrUnavailable caused by the caller's deadline", err)
	}
}

func TestUnparseableAnswers(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		"bad json": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status": `))
		},
		"no status": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
		},
		"502 without headers": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			c := newClient(t, srv.URL+"/oozie", oozie.WithVersion("v2"))
			_, err := c.JobInfo(context.Background(), "j")
			if !errors.Is(err, external.ErrUnavailable) {
				t.Errorf("%v; want ErrUnavailable", err)
			}
		})
	}
	// 401 with a Negotiate challenge says Kerberos is wanted.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", "Negotiate")
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	_, err := newClient(t, srv.URL+"/oozie", oozie.WithVersion("v2")).JobInfo(context.Background(), "j")
	if err == nil || !strings.Contains(err.Error(), "SPNEGO") || errors.Is(err, external.ErrUnavailable) {
		t.Errorf("401 Negotiate: %v", err)
	}
}

// headerAuth is an Authenticator such as a SPNEGO one would be.
type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) error {
	r.Header.Set("Authorization", "Negotiate dG9rZW4=")
	return nil
}

func TestAuthenticatorSeam(t *testing.T) {
	var got, query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, query = r.Header.Get("Authorization"), r.URL.RawQuery
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL+"/oozie", oozie.WithVersion("v1"), oozie.WithAuth(headerAuth{}))
	if err := c.Kill(context.Background(), "j"); err != nil {
		t.Fatal(err)
	}
	if got != "Negotiate dG9rZW4=" || strings.Contains(query, "user.name") {
		t.Errorf("Authorization %q, query %q", got, query)
	}
}

func TestJobsFilter(t *testing.T) {
	ctx := context.Background()
	f := startFake(t)
	c := newClient(t, f.URL)
	var ids []string
	for _, name := range []string{"a@2015-09-12T20:00Z", "b@2015-09-12T20:00Z", "a@2015-09-12T20:00Z"} {
		conf := map[string]string{"user.name": "u", "oozie.wf.application.path": "/app", "celosWorkflowName": name}
		id, err := c.Submit(ctx, conf)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	jobs, err := c.Jobs(ctx, oozie.Filter{Name: "a@2015-09-12T20:00Z"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != ids[2] || jobs[1].ID != ids[0] {
		t.Errorf("jobs = %+v; want %s, %s (newest first)", jobs, ids[2], ids[0])
	}
	if jobs, err = c.Jobs(ctx, oozie.Filter{User: "nobody"}, 10); err != nil || len(jobs) != 0 {
		t.Errorf("user filter: %v, %v", jobs, err)
	}
}

func TestConfigurationRoundTrip(t *testing.T) {
	x, err := oozie.ConfigurationXML(wfConf)
	if err != nil {
		t.Fatal(err)
	}
	back, err := oozie.ParseConfiguration(x)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(wfConf) {
		t.Fatalf("round trip: %v", back)
	}
	for k, v := range wfConf {
		if back[k] != v {
			t.Errorf("%s: %q, want %q", k, back[k], v)
		}
	}
	if _, err := oozie.ConfigurationXML(map[string]string{"": "x"}); err == nil {
		t.Error("an empty property name must be refused")
	}
}

func TestNewClientRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "oozie:11000", "ftp://h/oozie", "http:///oozie"} {
		if _, err := oozie.NewClient(u); err == nil {
			t.Errorf("NewClient(%q) accepted", u)
		}
	}
}
