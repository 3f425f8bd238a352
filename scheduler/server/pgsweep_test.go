package server

// The PostgreSQL outage sweep (docs/reliability.md, "PostgreSQL outage
// sweep (November 2026)"): the server on a database that stops answering.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/schema/workflow"
)

// stopBackends sends sig to every client backend of database db (the
// server processes serving its connections) and returns their pids.
func stopBackends(t *testing.T, srv *pgtest.Server, db string, sig syscall.Signal) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, db)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
		if err := syscall.Kill(int(p), sig); err != nil {
			t.Fatalf("signal %v to backend %d: %v", sig, p, err)
		}
	}
	return out
}

// post is POST url with a client that waits at most wait; it returns the
// status code, or an error when no answer came in time.
func post(url string, wait time.Duration) (int, string, error) {
	c := &http.Client{Timeout: wait}
	resp, err := c.Post(url, "", nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// slotStatus is the status of slot id@at (GET /slot-state; "" when it
// has none), failing the test when no answer comes within 2 minutes.
func slotStatus(t *testing.T, url, id, at string) string {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Get(url + "/slot-state?id=" + id + "&time=" + at)
	if err != nil {
		t.Fatalf("GET /slot-state: %v", err)
	}
	defer resp.Body.Close()
	var s api.Slot
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatalf("GET /slot-state: %v", err)
		}
	}
	return string(s.Status)
}

// pgsweepProject writes a project of one hourly workflow "hello" (from
// 13:00 on 2015-09-13) running command into dir/workflows and returns
// that directory.
func pgsweepProject(t *testing.T, dir string, command ...string) string {
	t.Helper()
	wf := filepath.Join(dir, "workflows")
	if err := os.Mkdir(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	p := workflow.Project{Format: workflow.FormatVersion, Project: "p", Workflows: []workflow.Workflow{{
		ID:                 "hello",
		Schedule:           workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger:            workflow.Trigger{Type: workflow.TriggerAlways},
		SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
		ExternalService:    workflow.ExternalService{Type: workflow.ServiceCommand, Command: command},
		StartTime:          time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC),
		WaitTimeoutSeconds: workflow.NeverTimeout,
	}}}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wf, "p.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return wf
}

// TestPgsweepHungConnectionsDoNotHangTheServer stops (SIGSTOP) every
// PostgreSQL backend serving a clustered server — the connections hang,
// as after a network partition that drops packets, while the database
// itself still takes new connections — and checks that a step answers
// within a bound, and that the server goes on stepping on new connections
// (the slot runs to SUCCESS) while the old ones stay hung.
func TestPgsweepHungConnectionsDoNotHangTheServer(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	if err := srv.Exec(context.Background(), "postgres", "CREATE DATABASE celos"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logs := &servertest.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server's log:\n%s", logs)
		}
	})
	cfg := Config{Workflows: pgsweepProject(t, dir, "true"), DB: srv.DSN("celos"), Jobs: filepath.Join(dir, "jobs"),
		InstanceID: "a", Lease: time.Second, URLFile: filepath.Join(dir, "url"), Stderr: logs}
	url, _ := startRun(t, cfg, openEngine)
	step := url + "/scheduler?time=2015-09-13T13:40Z"
	if code, body, err := post(step, time.Minute); err != nil || code != http.StatusOK {
		t.Fatalf("first step: %d %s %v", code, body, err)
	}

	pids := stopBackends(t, srv, "celos", syscall.SIGSTOP)
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
	})
	t.Logf("stopped %d backends", len(pids))
	// A step on hung connections fails within its store calls' bound
	// (30 s each), not never.
	t0 := time.Now()
	code, body, err := post(step, 2*time.Minute)
	if err != nil {
		t.Fatalf("POST /scheduler with the database's connections hung: no answer within 2 minutes: %v", err)
	}
	t.Logf("step on hung connections: %d after %s: %q", code, time.Since(t0).Round(time.Millisecond), body)

	// New connections work: the server steps again and runs the slot,
	// the hung backends still stopped.
	status := ""
	for end := time.Now().Add(3 * time.Minute); status != "SUCCESS"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the slot is %q 3 minutes after the connections hung (want SUCCESS: the server steps on new connections)", status)
		}
		if _, _, err := post(step, 2*time.Minute); err != nil {
			t.Fatalf("POST /scheduler: no answer within 2 minutes: %v", err)
		}
		status = slotStatus(t, url, "hello", "2015-09-13T13:00Z")
	}
}

// TestPgsweepOutageAnswersUnavailable kills PostgreSQL (a crash: SIGKILL)
// under a clustered server: a step and a pause answer 503
// `unavailable` — the database cannot be reached, no fault of the server
// — within a bound; once the database is back the server steps again by
// itself (same process) and the slot runs once.
func TestPgsweepOutageAnswersUnavailable(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	if err := srv.Exec(context.Background(), "postgres", "CREATE DATABASE celos"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	logs := &servertest.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server's log:\n%s", logs)
		}
	})
	cfg := Config{Workflows: pgsweepProject(t, dir, "sh", "-c", "echo run >> "+runs), DB: srv.DSN("celos"),
		Jobs: filepath.Join(dir, "jobs"), InstanceID: "a", Lease: time.Second, URLFile: filepath.Join(dir, "url"), Stderr: logs}
	url, _ := startRun(t, cfg, openEngine)
	step := url + "/scheduler?time=2015-09-13T13:40Z"
	if code, body, err := post(step, time.Minute); err != nil || code != http.StatusOK {
		t.Fatalf("first step: %d %s %v", code, body, err)
	}

	srv.Kill()
	for _, c := range []struct{ name, method, url string }{
		{"step", http.MethodPost, step},
		{"pause", http.MethodPost, url + "/pause?id=hello&paused=true"},
	} {
		req, _ := http.NewRequest(c.method, c.url, nil)
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err != nil {
			t.Fatalf("%s with PostgreSQL down: no answer within 2 minutes: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"unavailable"`) {
			t.Errorf("%s with PostgreSQL down: %d %s, want 503 unavailable", c.name, resp.StatusCode, b)
		}
	}

	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	status := ""
	for end := time.Now().Add(3 * time.Minute); status != "SUCCESS"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the slot is %q 3 minutes after PostgreSQL came back, want SUCCESS", status)
		}
		if _, _, err := post(step, 2*time.Minute); err != nil {
			t.Fatalf("POST /scheduler: %v", err)
		}
		status = slotStatus(t, url, "hello", "2015-09-13T13:00Z")
	}
	if b, err := os.ReadFile(runs); err != nil || string(b) != "run\n" {
		t.Errorf("the slot's runs: %q %v, want one", b, err)
	}
}
