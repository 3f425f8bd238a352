package server

// The PostgreSQL outage sweep (docs/reliability.md, "PostgreSQL outage
// sweep (November 2026)"): the server on a database that stops answering.

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/celos-go/celos/scheduler/slot"
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
// under a clustered server: a step, a pause and a kill answer 503
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
		{"kill", http.MethodPost, url + "/kill?id=hello&time=2015-09-13T13:00Z"},
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

// lockTable holds table of database db in ACCESS EXCLUSIVE mode for hold
// (a psql session's LOCK TABLE: every statement of the servers that
// touches it waits).
func lockTable(t *testing.T, srv *pgtest.Server, db, table string, hold time.Duration) {
	t.Helper()
	release := make(chan struct{})
	timer := time.AfterFunc(hold, func() { close(release) }) // (the fault's length, not an assertion)
	defer timer.Stop()
	lockUntil(t, srv, db, table, release)
}

// lockUntil holds table of database db in ACCESS EXCLUSIVE mode until
// release is closed (10 minutes at most).
func lockUntil(t *testing.T, srv *pgtest.Server, db, table string, release <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, srv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatalf("locking %s: %v", table, err)
	}
	select {
	case <-release:
	case <-time.After(10 * time.Minute):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// fleet is a PostgreSQL server with a database celos, a workflows
// directory of 6 hourly command workflows wf-0 … wf-5 from start, and the
// servers' common log (shown if the test fails).
type fleet struct {
	srv   *pgtest.Server
	dir   string
	wdir  string
	runs  string // the file the commands append to
	ids   []string
	start time.Time
	logs  *servertest.LockedBuffer
}

// newFleet makes a fleet whose workflows run script (sh -c; $RUNS is the
// runs file) and retry maxRetry times.
func newFleet(t *testing.T, start time.Time, script string, maxRetry int) *fleet {
	t.Helper()
	f := &fleet{srv: pgtest.StartT(t, pgtest.Options{}), dir: t.TempDir(), start: start, logs: &servertest.LockedBuffer{}}
	if err := f.srv.Exec(context.Background(), "postgres", "CREATE DATABASE celos"); err != nil {
		t.Fatal(err)
	}
	f.runs, f.wdir = filepath.Join(f.dir, "runs"), filepath.Join(f.dir, "workflows")
	if err := os.Mkdir(f.wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var ws []workflow.Workflow
	for i := range 6 {
		id := fmt.Sprintf("wf-%d", i)
		f.ids = append(f.ids, id)
		ws = append(ws, workflow.Workflow{ID: id, Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
			Trigger: workflow.Trigger{Type: workflow.TriggerAlways}, SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
			ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"sh", "-c", script},
				Env: map[string]string{"RUNS": f.runs}},
			StartTime: start, MaxRetryCount: maxRetry, WaitTimeoutSeconds: workflow.NeverTimeout})
	}
	b, err := (&workflow.Project{Format: workflow.FormatVersion, Project: "p", Workflows: ws}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.wdir, "p.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the servers' log:\n%s", f.logs)
		}
	})
	return f
}

// config is instance id's configuration on database dsn: lease 1 s, a
// step every 50 ms.
func (f *fleet) config(id, dsn string) Config {
	return Config{Workflows: f.wdir, DB: dsn, Jobs: filepath.Join(f.dir, "jobs-"+id), AutoSchedule: 50 * time.Millisecond,
		InstanceID: id, Lease: time.Second, URLFile: filepath.Join(f.dir, "url-"+id), Stderr: f.logs, Version: "test"}
}

// lines are the lines the commands appended to the runs file, counted.
func (f *fleet) lines() map[string]int {
	data, _ := os.ReadFile(f.runs)
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" {
			out[l]++
		}
	}
	return out
}

// successes counts the slots from f.start that url shows SUCCESS.
func (f *fleet) successes(url string) int {
	n := 0
	for _, id := range f.ids {
		var ws api.WorkflowSlots
		c := &http.Client{Timeout: time.Minute}
		resp, err := c.Get(url + "/workflow-slots?id=" + id + "&start=" + slot.FormatTime(f.start))
		if err != nil {
			return 0
		}
		err = json.NewDecoder(resp.Body).Decode(&ws)
		resp.Body.Close()
		if err != nil {
			return 0
		}
		for _, s := range ws.Slots {
			if s.Status == slot.Success {
				n++
			}
		}
	}
	return n
}

// ownedOnce reports whether each workflow is held by exactly one of the
// instances at urls, each seeing them all live (/healthz).
func (f *fleet) ownedOnce(urls ...string) bool {
	owned := map[string]int{}
	for _, u := range urls {
		var h struct {
			Instance struct {
				Live  []string `json:"live"`
				Owned []string `json:"owned"`
			} `json:"instance"`
		}
		c := &http.Client{Timeout: time.Minute}
		resp, err := c.Get(u + "/healthz")
		if err != nil {
			return false
		}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || len(h.Instance.Live) != len(urls) {
			return false
		}
		for _, wf := range h.Instance.Owned {
			owned[wf]++
		}
	}
	for _, id := range f.ids {
		if owned[id] != 1 {
			return false
		}
	}
	return true
}

// waitUntil polls cond every 100 ms, failing the test after 3 minutes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(3 * time.Minute); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 3 minutes: %s", what)
		}
	}
}

// TestPgsweepTwoInstancesThroughOutages runs two instances (lease 1 s,
// a step every 50 ms) over 6 hourly command workflows with a 12-hour
// backlog, one job at a time each, each job taking 2 seconds, and meanwhile: kills PostgreSQL and
// starts it again 3 s later (both instances lose every connection, their
// leases expire), holds each table the servers write in ACCESS EXCLUSIVE
// mode for 4 s (leases expire while steps are blocked), and stops every
// backend (SIGSTOP) for 4 s. Every slot runs exactly once and ends
// SUCCESS, and afterwards each workflow is held by exactly one of the two
// live instances.
func TestPgsweepTwoInstancesThroughOutages(t *testing.T) {
	if testing.Short() {
		t.Skip("two servers through a minute of faults: not with -short")
	}
	f := newFleet(t, time.Now().UTC().Truncate(time.Hour).Add(-11*time.Hour), `sleep 2; echo "$CELOS_SLOT_ID" >> "$RUNS"`, 0)
	srv, ctx := f.srv, context.Background()
	urlA, _ := startRun(t, f.config("a", srv.DSN("celos")), openEngine)
	urlB, _ := startRun(t, f.config("b", srv.DSN("celos")), openEngine)
	ran := func() int { return len(f.lines()) }
	waitUntil(t, "a first job ends", func() bool { return ran() >= 1 })

	t.Log("PostgreSQL killed, started again 3 s later")
	srv.Kill()
	time.Sleep(3 * time.Second) // (the outage's length)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"celos_slots", "celos_intents", "cluster_leases", "cluster_jobs", "celos_workflows"} {
		t.Logf("%s locked for 4 s (%d runs so far)", table, ran())
		lockTable(t, srv, "celos", table, 4*time.Second)
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("every backend stopped for 4 s (%d runs so far)", ran())
	pids := stopBackends(t, srv, "celos", syscall.SIGSTOP)
	time.Sleep(4 * time.Second) // (the fault's length)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGCONT)
	}

	want := 0
	for t0 := f.start; !t0.After(time.Now()); t0 = t0.Add(time.Hour) {
		want += len(f.ids)
	}
	waitUntil(t, fmt.Sprintf("%d slots SUCCESS", want), func() bool { return f.successes(urlA) == want })
	count := f.lines()
	for s, n := range count {
		if n != 1 {
			t.Errorf("slot %s ran %d times", s, n)
		}
	}
	if len(count) != want {
		t.Errorf("%d slots ran, want %d", len(count), want)
	}
	// Who owns what after: each workflow held by exactly one instance,
	// both live.
	waitUntil(t, "each workflow held by exactly one of the two live instances", func() bool { return f.ownedOnce(urlA, urlB) })
	t.Logf("%d slots ran once each; %d take-overs logged", len(count), strings.Count(f.logs.String(), "took over expired leases"))
}

// TestPgsweepOutageLongerThanTheGraceLosesNoJob runs two instances (lease
// 1 s, --job-grace 6 s) with a 25-second command job per slot, and
// kills PostgreSQL for 12 s while the jobs run, a (which started them)
// back 2 s after b: no instance could heart-beat during the outage, so
// none may take the other's silence for a lost host. Every slot runs once, to SUCCESS; no job is declared lost.
// (Before: the first instance back took every workflow over and declared
// the other's running jobs lost at once; their slots were retried beside
// the jobs still running.)
func TestPgsweepOutageLongerThanTheGraceLosesNoJob(t *testing.T) {
	if testing.Short() {
		t.Skip("two servers through an outage longer than the job grace: not with -short")
	}
	f := newFleet(t, time.Now().UTC().Truncate(time.Hour), `echo "start $CELOS_SLOT_ID" >> "$RUNS"; sleep 25`, 2)
	srv, ctx := f.srv, context.Background()
	// a connects as a role of its own, so that it can be kept out.
	if err := srv.Exec(ctx, "postgres", "CREATE ROLE celos_a LOGIN SUPERUSER PASSWORD '"+srv.Password+"'"); err != nil {
		t.Fatal(err)
	}
	cfgA := f.config("a", strings.Replace(srv.DSN("celos"), "://"+srv.User+":", "://celos_a:", 1))
	cfgB := f.config("b", srv.DSN("celos"))
	cfgA.JobGrace, cfgB.JobGrace = 6*time.Second, 6*time.Second
	urlA, _ := startRun(t, cfgA, openEngine)
	startRun(t, cfgB, openEngine)
	waitUntil(t, "every slot's job started", func() bool { return len(f.lines()) == len(f.ids) })

	t.Log("PostgreSQL killed for 12 s, twice the job grace; a, which runs every job, back 2 s after b")
	if err := srv.Exec(ctx, "postgres", "ALTER ROLE celos_a NOLOGIN"); err != nil { // (its open connections go on)
		t.Fatal(err)
	}
	srv.Kill()
	time.Sleep(12 * time.Second) // (the outage's length)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // (a kept out: b alone is back)
	if err := srv.Exec(ctx, "postgres", "ALTER ROLE celos_a LOGIN"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every slot SUCCESS", func() bool { return f.successes(urlA) == len(f.ids) })
	for s, n := range f.lines() {
		if n != 1 {
			t.Errorf("%s: %d times", s, n)
		}
	}
	if n := strings.Count(f.logs.String(), "command job declared lost"); n > 0 {
		t.Errorf("%d jobs declared lost, all of them running", n)
	}
}

// TestPgsweepStepThatCannotReadAnswersUnavailable locks celos_slots
// (another session's LOCK TABLE) before a step of a clustered server: the
// step reads no workflow's state within the store's call timeout and
// answers 503 `unavailable` — it did nothing — not 200.
func TestPgsweepStepThatCannotReadAnswersUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the store's 30 s call timeout: not with -short")
	}
	f := newFleet(t, time.Now().UTC().Truncate(time.Hour).Add(-2*time.Hour), "true", 0)
	cfg := f.config("a", f.srv.DSN("celos"))
	cfg.AutoSchedule = 0
	url, _ := startRun(t, cfg, openEngine)
	locked, release := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(locked)
		lockUntil(t, f.srv, "celos", "celos_slots", release)
	}()
	defer func() { close(release); <-locked }()
	waitUntil(t, "celos_slots locked", func() bool {
		var n int
		err := queryOne(f.srv, "celos", `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'celos_slots' AND l.mode = 'AccessExclusiveLock' AND l.granted`, &n)
		return err == nil && n == 1
	})
	code, body, err := post(url+"/scheduler", 5*time.Minute)
	if err != nil {
		t.Fatalf("POST /scheduler with celos_slots locked: %v", err)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"unavailable"`) {
		t.Errorf("POST /scheduler with celos_slots locked: %d %s, want 503 unavailable", code, body)
	}
}
