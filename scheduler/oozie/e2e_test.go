package oozie_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/oozietest"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/hdfscheck"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
)

// oozietest.Main also stops hdfstest's shared cluster.
func TestMain(m *testing.M) { oozietest.Main(m) }

// e2e is an installation as `celos server` wires it: the real engine and
// state database, the oozie service against the fake Oozie, hdfsCheck on a
// real HDFS mini cluster.
type e2e struct {
	t       *testing.T
	ctx     context.Context
	hdfs    *hdfstest.Cluster
	oozie   *ooziefake.Server
	engine  *engine.Engine
	db      *statedb.DB
	fs      *hdfscheck.FS
	workDir string
	only    []string // the workflows a step steps (nil: all)
}

func newE2E(t *testing.T, c *hdfstest.Cluster, project *workflow.Project, only ...string) *e2e {
	t.Helper()
	ctx := context.Background()
	f := startFake(t, ooziefake.RequireUser())
	// Oozie refuses a submission whose application is not in HDFS.
	f.SetCheckApp(func(appPath string) error {
		_, err := c.Client().Stat(strings.TrimPrefix(appPath, "hdfs://"+c.Addr()) + "/workflow.xml")
		return err
	})

	dir := t.TempDir()
	wfDir := filepath.Join(dir, "workflows")
	fixture.Write(t, wfDir, project)
	// The installation defaults file, as `celos server --defaults` reads it.
	doc := fmt.Sprintf(`{
  "CELOS_DEFAULT_HDFS": "hdfs://%s",
  "CELOS_DEFAULT_OOZIE": %q,
  "CELOS_DEFAULT_OOZIE_PROPERTIES": {"user.name": "celos", "nameNode": "hdfs://%s", "queue": "default", "jobTracker": "rm:8032"}
}`, c.Addr(), f.URL, c.Addr())
	inst := newServerEngine(t, c, dir, wfDir, doc, 2*time.Second)
	return &e2e{t: t, ctx: ctx, hdfs: c, oozie: f, engine: inst.engine, db: inst.db, fs: inst.fs, workDir: dir, only: only}
}

// serverEngine is what `celos server` wires for the tests against an
// Oozie (the fake or the real one): an engine on the workflows of wfDir
// with a file state database in dir/db, hdfsCheck set up from the mini
// cluster's configuration, and the oozie service of the installation
// defaults, which it writes to dir/defaults.json from doc.
type serverEngine struct {
	engine   *engine.Engine
	db       *statedb.DB
	fs       *hdfscheck.FS
	defaults *defaults.Defaults
}

// newServerEngine starts a serverEngine whose oozie service waits
// oozieTimeout for an answer to a call.
func newServerEngine(t testing.TB, c *hdfstest.Cluster, dir, wfDir, doc string, oozieTimeout time.Duration) serverEngine {
	t.Helper()
	defaultsPath := filepath.Join(dir, "defaults.json")
	if err := os.WriteFile(defaultsPath, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := defaults.Load(defaultsPath)
	if err != nil {
		t.Fatal(err)
	}
	mux, hfs, err := hdfscheck.Setup(d, c.ConfDir(), hdfscheck.Options{User: c.User(), CallTimeout: 5 * time.Second, CoolDown: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hfs.Close() })
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng, err := engine.New(engine.Options{
		WorkflowsDir: wfDir,
		Store:        db,
		Services:     map[string]external.Service{workflow.ServiceOozie: oozie.NewService(d, nil, oozie.WithCallTimeout(oozieTimeout))},
		FS:           mux,
		CallTimeout:  5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs := eng.LoadErrors(); len(errs) > 0 {
		t.Fatalf("load errors: %v", errs)
	}
	return serverEngine{engine: eng, db: db, fs: hfs, defaults: d}
}

func (e *e2e) step(now time.Time) {
	e.t.Helper()
	if err := e.engine.Step(e.ctx, now, e.only); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) state(wf string, t time.Time) slot.State {
	e.t.Helper()
	return engineSlotState(e.t, e.engine, wf, t)
}

// engineSlotState is the state of wf's slot at t in eng: WAITING for a
// slot the store has no record of yet.
func engineSlotState(t testing.TB, eng *engine.Engine, wf string, at time.Time) slot.State {
	t.Helper()
	st, err := eng.SlotState(context.Background(), slot.ID{Workflow: wf, Time: at})
	if errors.Is(err, slot.ErrSlotNotFound) {
		return slot.NewWaiting(slot.ID{Workflow: wf, Time: at})
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// expect checks the statuses of consecutive hourly slots from first.
func (e *e2e) expect(when, wf string, first time.Time, want ...slot.Status) {
	e.t.Helper()
	for i, w := range want {
		t := first.Add(time.Duration(i) * time.Hour)
		if st := e.state(wf, t); st.Status != w {
			e.t.Errorf("%s: slot %s@%s is %s (ext %q, retry %d), want %s; problems: %v",
				when, wf, slot.FormatTime(t), st.Status, st.ExternalID, st.RetryCount, w, e.engine.Problems(wf))
		}
	}
}

func (e *e2e) touch(p string) {
	e.t.Helper()
	mkfile(e.t, e.hdfs, p)
}

func mkfile(t *testing.T, c *hdfstest.Cluster, p string) {
	t.Helper()
	cl := c.Client()
	if err := cl.MkdirAll(path.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := cl.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// compileProject compiles the CUE project of the test, as `celos export`
// does for a deployment.
func compileProject(t *testing.T) *workflow.Project {
	t.Helper()
	p, _, err := schema.Compile("testdata/e2e")
	if err != nil {
		t.Fatalf("compile testdata/e2e: %v", err)
	}
	return p
}

func workflowOf(t *testing.T, p *workflow.Project, id string) *workflow.Workflow {
	t.Helper()
	for i := range p.Workflows {
		if p.Workflows[i].ID == id {
			return &p.Workflows[i]
		}
	}
	t.Fatalf("project %s has no workflow %s", p.Project, id)
	return nil
}

// The end-to-end scenario: a slot waits for its data in HDFS,
// becomes READY when _READY appears, is submitted to Oozie with the right
// properties, runs and succeeds; a second slot fails and is retried; a
// kill reaches Oozie; an Oozie outage or a NameNode outage fails nothing.
func TestEndToEnd(t *testing.T) {
	c := hdfstest.StartT(t, hdfstest.Options{}) // its NameNode is stopped below
	project := compileProject(t)                // testdata/e2e, a CUE project
	t.Run("recover after crash", func(t *testing.T) { recoverAfterCrash(t, c, project) })
	t0 := time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)
	e := newE2E(t, c, project, "wordcount")
	e.touch("/e2e/app/wordcount/workflow.xml") // deployed

	var mu sync.Mutex
	attempts := map[string]int{}
	e.oozie.SetPlan(func(conf map[string]string) []string {
		mu.Lock()
		defer mu.Unlock()
		attempts[conf["hour"]]++
		switch {
		case conf["hour"] == "21" && attempts["21"] == 1:
			return []string{ooziefake.Prep, ooziefake.Running, ooziefake.Failed}
		case conf["hour"] == "22":
			return []string{ooziefake.Running} // until killed
		}
		return []string{ooziefake.Running, ooziefake.Succeeded}
	})
	wf, h := "wordcount", time.Hour
	now := t0.Add(2*h + 30*time.Minute) // slots 20:00, 21:00, 22:00

	// 1. No data yet: every slot waits, and says why.
	e.step(now)
	e.expect("no data", wf, t0, slot.Waiting, slot.Waiting, slot.Waiting)
	ts, err := e.engine.TriggerStatus(e.ctx, slot.ID{Workflow: wf, Time: t0}, now)
	if err != nil || ts.Ready || ts.Type != "HDFSCheckTrigger" || !strings.Contains(ts.Description, "/e2e/input/wordcount/2015-09-12T2000/_READY is not ready") {
		t.Errorf("trigger status %+v, %v", ts, err)
	}
	if n := len(e.oozie.Jobs()); n != 0 {
		t.Fatalf("%d jobs submitted before any data", n)
	}

	// 2. The data lands: READY, then submitted (one transition per step).
	for _, hr := range []string{"20", "21", "22"} {
		e.touch("/e2e/input/wordcount/2015-09-12T" + hr + "00/_READY")
	}
	e.step(now)
	e.expect("data landed", wf, t0, slot.Ready, slot.Ready, slot.Ready)
	e.step(now)
	e.expect("submitted", wf, t0, slot.Running, slot.Running, slot.Running)

	jobs := e.oozie.Jobs()
	if len(jobs) != 3 {
		t.Fatalf("%d jobs submitted, want 3", len(jobs))
	}
	byHour := map[string]ooziefake.Job{}
	for _, j := range jobs {
		byHour[j.Conf["hour"]] = j
	}
	j20 := byHour["20"]
	if st := e.state(wf, t0); st.ExternalID != j20.ID {
		t.Errorf("slot 20:00 records external ID %q, Oozie has %q", st.ExternalID, j20.ID)
	}
	wantConf := map[string]string{
		"celosWorkflowName": "wordcount@2015-09-12T20:00Z",
		"year":              "2015", "month": "09", "day": "12", "hour": "20", "minute": "00", "second": "00",
		"oozie.wf.application.path": "/e2e/app/wordcount",
		"inputDir":                  "/e2e/input/wordcount/2015-09-12T2000",
		"outputDir":                 "/e2e/output/wordcount/2015091220",
		"user.name":                 "celos",              // installation default
		"nameNode":                  "hdfs://" + c.Addr(), // installation default
		"jobTracker":                "rm:8032",            // installation default
		"queue":                     "etl",                // the workflow's own overrides the default
	}
	for k, v := range wantConf {
		if j20.Conf[k] != v {
			t.Errorf("submitted %s = %q, want %q", k, j20.Conf[k], v)
		}
	}
	if len(j20.Conf) != len(wantConf) {
		t.Errorf("submitted conf has %d properties, want %d: %v", len(j20.Conf), len(wantConf), j20.Conf)
	}
	if !strings.Contains(j20.ConfXML, "<name>celosWorkflowName</name><value>wordcount@2015-09-12T20:00Z</value>") {
		t.Errorf("received XML:\n%s", j20.ConfXML)
	}

	// 3. Running, then 20:00 succeeds, 21:00 fails and goes back to WAITING
	// for its retry, 22:00 keeps running.
	e.step(now)
	e.expect("running", wf, t0, slot.Running, slot.Running, slot.Running)
	e.step(now)
	e.expect("finished", wf, t0, slot.Success, slot.Running, slot.Running)
	e.step(now)
	e.expect("21:00 failed", wf, t0, slot.Success, slot.Waiting, slot.Running)
	if st := e.state(wf, t0.Add(h)); st.RetryCount != 1 {
		t.Errorf("21:00 retry count %d, want 1", st.RetryCount)
	}
	e.step(now) // trigger re-checked: READY
	e.step(now) // resubmitted
	e.expect("retried", wf, t0, slot.Success, slot.Running, slot.Running)
	retry := e.state(wf, t0.Add(h))
	if retry.ExternalID == byHour["21"].ID || retry.ExternalID == "" {
		t.Errorf("the retry did not submit a new job: %q", retry.ExternalID)
	}
	e.step(now)
	e.step(now)
	e.expect("retry succeeded", wf, t0, slot.Success, slot.Success, slot.Running)

	// 4. Kill reaches Oozie.
	if err := e.engine.Kill(e.ctx, slot.ID{Workflow: wf, Time: t0.Add(2 * h)}); err != nil {
		t.Fatal(err)
	}
	e.expect("killed", wf, t0.Add(2*h), slot.Killed)
	if j, _ := e.oozie.Job(byHour["22"].ID); !j.Killed || j.Status != ooziefake.Killed {
		t.Errorf("the kill did not reach Oozie: %+v", j)
	}

	// 5. Oozie outages: a READY slot stays READY, a RUNNING slot stays
	// RUNNING, nothing fails; the error is kept for /trigger-status and the UI.
	now = t0.Add(3*h + 30*time.Minute) // slot 23:00
	e.touch("/e2e/input/wordcount/2015-09-12T2300/_READY")
	e.step(now)
	e.expect("23:00 data", wf, t0.Add(3*h), slot.Ready)
	e.oozie.Down()
	e.step(now)
	e.step(now)
	e.expect("Oozie down", wf, t0.Add(3*h), slot.Ready)
	if !hasProblem(e.engine.Problems(wf), "", "unreachable") {
		t.Errorf("no submit problem recorded while Oozie is down: %v", e.engine.Problems(wf))
	}
	if err := e.oozie.Up(); err != nil {
		t.Fatal(err)
	}
	e.oozie.SetPlan(nil) // RUNNING until told otherwise
	e.step(now)
	e.expect("Oozie back", wf, t0.Add(3*h), slot.Running)
	for _, mode := range []ooziefake.Mode{ooziefake.Error500, ooziefake.Garbage} {
		e.oozie.SetMode(mode)
		e.step(now)
		e.expect(fmt.Sprintf("Oozie mode %d", mode), wf, t0.Add(3*h), slot.Running)
		if !hasProblem(e.engine.Problems(wf), "status", "") {
			t.Errorf("mode %d: no status problem recorded: %v", mode, e.engine.Problems(wf))
		}
	}
	e.oozie.SetMode(ooziefake.Normal)
	st := e.state(wf, t0.Add(3*h))
	if err := e.oozie.SetStatus(st.ExternalID, ooziefake.Succeeded); err != nil {
		t.Fatal(err)
	}
	e.step(now)
	e.expect("after the outages", wf, t0, slot.Success, slot.Success, slot.Killed, slot.Success)
	if p := e.engine.Problems(wf); len(p) != 0 {
		t.Errorf("problems left after recovery: %v", p)
	}

	// 6. NameNode outage: the waiting slot stays WAITING with the error.
	now = t0.Add(4*h + 30*time.Minute) // slot 00:00
	if err := c.StopNameNode(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.step(now)
	e.expect("NameNode down", wf, t0.Add(4*h), slot.Waiting)
	if !hasProblem(e.engine.Problems(wf), "trigger", "hdfs://") {
		t.Errorf("no trigger problem recorded while the NameNode is down: %v", e.engine.Problems(wf))
	}
	ts, err = e.engine.TriggerStatus(e.ctx, slot.ID{Workflow: wf, Time: t0.Add(4 * h)}, now)
	if err != nil || ts.Ready || ts.Error == "" {
		t.Errorf("trigger status while the NameNode is down: %+v, %v", ts, err)
	}
	if err := c.StartNameNode(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The shared client backs off a restarted NameNode for 5 s: a fresh one.
	cl, err := c.NewClient(c.User())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.MkdirAll("/e2e/input/wordcount/2015-09-13T0000/_READY", 0o755); err != nil { // a directory counts
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.state(wf, t0.Add(4*h)).Status == slot.Waiting && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		e.step(now)
	}
	e.expect("NameNode back", wf, t0.Add(4*h), slot.Ready)
}

func hasProblem(ps []scheduler.Problem, op, text string) bool {
	for _, p := range ps {
		if (op == "" || p.Op == op) && strings.Contains(p.Error, text) {
			return true
		}
	}
	return false
}

// A crash between Oozie accepting a job and the engine recording it: on
// the next step the engine finds the job through Recover instead of
// submitting a second one.
func recoverAfterCrash(t *testing.T, c *hdfstest.Cluster, project *workflow.Project) {
	t0 := time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)
	w := workflowOf(t, project, "recover")
	e := newE2E(t, c, project, "recover")
	e.touch("/e2e/app/recover/workflow.xml")
	e.touch("/e2e/input/recover/2015-09-12T2000/_READY")
	now := t0.Add(30 * time.Minute)
	e.step(now)
	e.expect("ready", "recover", t0, slot.Ready)

	// What the crashed process did: recorded its intent, and Oozie took the job.
	id := slot.ID{Workflow: "recover", Time: t0}
	if err := e.db.PutIntent(id, store.Intent{Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d, _ := defaults.Load(filepath.Join(e.workDir, "defaults.json"))
	jobID, err := oozie.NewService(d, nil).Submit(e.ctx, w, id)
	if err != nil {
		t.Fatal(err)
	}

	e.step(now)
	e.expect("recovered", "recover", t0, slot.Running)
	if st := e.state("recover", t0); st.ExternalID != jobID {
		t.Errorf("the slot records %q, want the job submitted before the crash %q", st.ExternalID, jobID)
	}
	if n := len(e.oozie.Jobs()); n != 1 {
		t.Errorf("%d jobs in Oozie: the slot was submitted twice", n)
	}
}
