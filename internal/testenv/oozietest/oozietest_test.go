package oozietest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/oozietest"
)

func TestMain(m *testing.M) { oozietest.Main(m) }

// call is a raw Oozie REST call (the helper is tested without celos's
// client).
func call(t *testing.T, method, u string, body []byte, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/xml;charset=UTF-8")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s (oozie-error-message %q), want %d", method, u, resp.Status, resp.Header.Get("oozie-error-message"), want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, u, err, b)
		}
	}
}

func submit(t *testing.T, base string, conf map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("<configuration>")
	for k, v := range conf {
		fmt.Fprintf(&b, "<property><name>%s</name><value>%s</value></property>", k, v)
	}
	b.WriteString("</configuration>")
	var out struct{ ID string }
	call(t, http.MethodPost, base+"/v2/jobs?action=start&user.name="+url.QueryEscape(conf["user.name"]), []byte(b.String()), http.StatusCreated, &out)
	return out.ID
}

func waitStatus(t *testing.T, base, id, user string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var out struct{ Status string }
		call(t, http.MethodGet, base+"/v2/job/"+id+"?show=info&user.name="+user, nil, http.StatusOK, &out)
		for _, w := range want {
			if out.Status == w {
				return out.Status
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after 60 s, want one of %v", id, out.Status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSmoke runs a workflow whose fs action writes _SUCCESS in HDFS, on the
// shared Oozie.
func TestSmoke(t *testing.T) {
	env := oozietest.Shared(t)
	base, c := env.Oozie.URL(), env.HDFS
	var versions []int
	call(t, http.MethodGet, base+"/versions", nil, http.StatusOK, &versions)
	if diff := cmp.Diff([]int{0, 1, 2}, versions); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	hdfstest.WriteFile(t, c.Client(), "/smoke/app/workflow.xml", oozietest.TouchApp)
	began := time.Now()
	id := submit(t, base, map[string]string{
		"user.name":                 c.User(),
		"oozie.wf.application.path": c.URL("/smoke/app"),
		"nameNode":                  c.URL(""),
		"celosWorkflowName":         "smoke",
		"outputDir":                 "/smoke/out",
	})
	waitStatus(t, base, id, c.User(), "SUCCEEDED")
	t.Logf("submit to SUCCEEDED: %v", time.Since(began).Round(time.Millisecond))
	if _, err := c.Client().Stat("/smoke/out/_SUCCESS"); err != nil {
		t.Errorf("the fs action wrote no _SUCCESS: %v", err)
	}
}

// TestRestart kills Oozie and starts it again: same URL, the job is still
// known (Derby keeps it), and a new job runs.
func TestRestart(t *testing.T) {
	shared := oozietest.Shared(t)
	env := oozietest.StartT(t, oozietest.Options{HDFS: shared.HDFS})
	base, c := env.Oozie.URL(), env.HDFS
	hdfstest.WriteFile(t, c.Client(), "/restart/app/workflow.xml", oozietest.TouchApp)
	conf := map[string]string{
		"user.name":                 c.User(),
		"oozie.wf.application.path": c.URL("/restart/app"),
		"nameNode":                  c.URL(""),
		"celosWorkflowName":         "restart",
		"outputDir":                 "/restart/out1",
	}
	id := submit(t, base, conf)
	waitStatus(t, base, id, c.User(), "SUCCEEDED")

	env.Oozie.Kill()
	if _, err := http.Get(base + "/versions"); err == nil {
		t.Fatal("Oozie still answers after Kill")
	}
	began := time.Now()
	if err := env.Oozie.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart: %v", time.Since(began).Round(time.Millisecond))
	if env.Oozie.URL() != base {
		t.Errorf("URL after restart %s, want %s", env.Oozie.URL(), base)
	}
	waitStatus(t, base, id, c.User(), "SUCCEEDED")
	conf["outputDir"] = "/restart/out2"
	waitStatus(t, base, submit(t, base, conf), c.User(), "SUCCEEDED")

	if err := env.Oozie.Shutdown(); err != nil {
		t.Error(err)
	}
	if b, err := os.ReadFile(env.Oozie.ConsolePath()); err != nil || !strings.Contains(string(b), "OK shutdown") {
		t.Errorf("no clean shutdown in %s: %v", env.Oozie.ConsolePath(), err)
	}
}

// TestWaitAction: a job that runs until the test releases it can be
// suspended, resumed and killed, as a long job on a cluster.
func TestWaitAction(t *testing.T) {
	env := oozietest.Shared(t)
	base, c, u := env.Oozie.URL(), env.HDFS, env.HDFS.User()
	hdfstest.WriteFile(t, c.Client(), "/wait/app/workflow.xml", oozietest.WaitApp)
	releaseDir := t.TempDir()
	conf := map[string]string{
		"user.name":                 u,
		"oozie.wf.application.path": c.URL("/wait/app"),
		"celosWorkflowName":         "wait",
		"releaseDir":                releaseDir,
		"hour":                      "20",
	}
	id := submit(t, base, conf)
	waitStatus(t, base, id, u, "RUNNING")
	call(t, http.MethodPut, base+"/v2/job/"+id+"?action=suspend&user.name="+u, nil, http.StatusOK, nil)
	waitStatus(t, base, id, u, "SUSPENDED")
	call(t, http.MethodPut, base+"/v2/job/"+id+"?action=resume&user.name="+u, nil, http.StatusOK, nil)
	waitStatus(t, base, id, u, "RUNNING")
	if err := os.WriteFile(filepath.Join(releaseDir, "20"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, base, id, u, "SUCCEEDED")

	conf["releaseDir"] = t.TempDir() // never released
	id = submit(t, base, conf)
	waitStatus(t, base, id, u, "RUNNING")
	call(t, http.MethodPut, base+"/v2/job/"+id+"?action=kill&user.name="+u, nil, http.StatusOK, nil)
	waitStatus(t, base, id, u, "KILLED")
}

// BenchmarkStart measures Oozie's start-up over the shared mini cluster:
// a first start (a new Derby database and its schema), a restart on the
// same directory, and a clean stop.
//
//	go test -run '^$' -bench Start -benchtime 3x ./internal/testenv/oozietest/
func BenchmarkStart(b *testing.B) {
	env := oozietest.Shared(b)
	var first, restart, stop time.Duration
	for i := 0; i < b.N; i++ {
		began := time.Now()
		s, err := oozietest.Start(context.Background(), oozietest.Options{HDFS: env.HDFS, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		first += time.Since(began)
		began = time.Now()
		if err := s.Shutdown(); err != nil {
			b.Fatal(err)
		}
		stop += time.Since(began)
		began = time.Now()
		if err := s.Restart(context.Background()); err != nil {
			b.Fatal(err)
		}
		restart += time.Since(began)
		s.Stop()
	}
	b.ReportMetric(first.Seconds()/float64(b.N), "s-to-ready")
	b.ReportMetric(restart.Seconds()/float64(b.N), "s-to-ready-again")
	b.ReportMetric(stop.Seconds()/float64(b.N), "s-to-stop")
}

// TestStartFailure: an Oozie that cannot start yields an error carrying
// the tails of its logs, and no JVM stays behind.
func TestStartFailure(t *testing.T) {
	env := oozietest.Shared(t)
	dir := t.TempDir()
	_, err := oozietest.Start(context.Background(), oozietest.Options{
		HDFS: env.HDFS, Dir: dir,
		Conf: map[string]string{"oozie.services.ext": "celos.NoSuchService"},
	})
	if err == nil {
		t.Fatal("Start succeeded with a service that does not exist")
	}
	for _, want := range []string{"ERR start", "E0103", "celos.NoSuchService", "console.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "oozie.json")); err == nil {
		t.Errorf("oozie.json written by a failed start: %s", b)
	}
}
