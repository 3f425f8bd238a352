package oozie_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/oozietest"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
)

// The Oozie applications of testdata/real, as a project would deploy them
// to HDFS. Each names its jobs ${celosWorkflowName}, the recommended
// practice (docs/oozie.md), so the crash-recovery lookup is one call.
var realApps = map[string]string{
	// touch: an fs action writes ${outputDir}/_SUCCESS.
	"touch": oozietest.TouchApp,
	// fail: straight to a kill node.
	"fail": `<workflow-app xmlns="uri:oozie:workflow:0.5" name="${celosWorkflowName}">
  <start to="fail"/>
  <kill name="fail"><message>failing on purpose for ${hour}</message></kill>
  <end name="end"/>
</workflow-app>
`,
	// wait: RUNNING until the local file ${releaseDir}/${hour} exists (the
	// test server's wait action, standing in for a long job on YARN).
	"wait": oozietest.WaitApp,
}

// real is an installation as `celos server` wires it, against a real Oozie
// and its real HDFS: the engine, the state database, the oozie service and
// hdfsCheck.
type real struct {
	t          testing.TB
	ctx        context.Context
	hdfs       *hdfstest.Cluster
	oozie      *oozietest.Server
	client     *oozie.Client
	engine     *engine.Engine
	db         *statedb.DB
	defaults   *defaults.Defaults
	releaseDir string
}

// newReal deploys testdata/real's applications under /real in HDFS and
// starts an engine on the project's compiled JSON.
func newReal(t *testing.T, env oozietest.Env) *real {
	t.Helper()
	project, _, err := schema.Compile("testdata/real")
	if err != nil {
		t.Fatalf("compile testdata/real: %v", err)
	}
	return newRealProject(t, env, project)
}

// newRealProject is newReal for any project whose workflows use the
// applications of realApps (${nameNode}/real/app/<name>).
func newRealProject(t testing.TB, env oozietest.Env, project *workflow.Project) *real {
	t.Helper()
	ctx := context.Background()
	c := env.HDFS
	for name, xml := range realApps {
		hdfstest.WriteFile(t, c.Client(), "/real/app/"+name+"/workflow.xml", xml)
	}
	dir := t.TempDir()
	wfDir := filepath.Join(dir, "workflows")
	fixture.Write(t, wfDir, project)
	releaseDir := filepath.Join(dir, "release")
	if err := os.MkdirAll(releaseDir, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{
  "CELOS_DEFAULT_HDFS": "hdfs://%s",
  "CELOS_DEFAULT_OOZIE": %q,
  "CELOS_DEFAULT_OOZIE_PROPERTIES": {"user.name": %q, "nameNode": "hdfs://%s", "releaseDir": %q}
}`, c.Addr(), env.Oozie.URL(), c.User(), c.Addr(), releaseDir)
	inst := newServerEngine(t, c, dir, wfDir, doc, 5*time.Second)
	cl, err := oozie.NewClient(env.Oozie.URL(), oozie.WithAuth(oozie.SimpleAuth{User: c.User()}))
	if err != nil {
		t.Fatal(err)
	}
	// The cluster may be shared: start from a clean /real/input and output.
	for _, p := range []string{"/real/input", "/real/output"} {
		if err := c.Client().RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	return &real{t: t, ctx: ctx, hdfs: c, oozie: env.Oozie, client: cl, engine: inst.engine, db: inst.db, defaults: inst.defaults, releaseDir: releaseDir}
}

func (r *real) step(now time.Time, only ...string) {
	r.t.Helper()
	if err := r.engine.Step(r.ctx, now, only); err != nil {
		r.t.Fatal(err)
	}
}

func (r *real) state(wf string, t time.Time) slot.State {
	r.t.Helper()
	return engineSlotState(r.t, r.engine, wf, t)
}

// stepUntil steps workflow wf (Oozie runs jobs asynchronously) until its
// slot at t is want, for at most 60 s.
func (r *real) stepUntil(now time.Time, wf string, t time.Time, want slot.Status) slot.State {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r.step(now, wf)
		st := r.state(wf, t)
		if st.Status == want {
			return st
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("slot %s@%s is %s (ext %q, retry %d) after 60 s, want %s; problems: %v",
				wf, slot.FormatTime(t), st.Status, st.ExternalID, st.RetryCount, want, r.engine.Problems(wf))
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// waitJob polls Oozie until job id has status want, for at most 60 s.
func (r *real) waitJob(id, want string) *oozie.Job {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := r.client.JobInfo(r.ctx, id)
		if err != nil {
			r.t.Fatal(err)
		}
		if j.Status == want {
			return j
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("Oozie job %s is %s after 60 s, want %s", id, j.Status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jobAction is PUT /v2/job/<id>?action=<a>, what an operator does with
// Oozie's CLI (celos's client has no suspend or resume).
func (r *real) jobAction(id, action string) {
	r.t.Helper()
	u := r.oozie.URL() + "/v2/job/" + url.PathEscape(id) + "?action=" + action + "&user.name=" + url.QueryEscape(r.hdfs.User())
	req, err := http.NewRequestWithContext(r.ctx, http.MethodPut, u, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("PUT %s: %s (%s)", u, resp.Status, resp.Header.Get("oozie-error-message"))
	}
}

func (r *real) release(hour string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.releaseDir, hour), nil, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

var t20 = time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)

// TestRealOozieSuccessChain: a slot waits for its input, is submitted to
// the real Oozie by celos's oozie service, its fs action writes the slot's
// _SUCCESS, celos polls it to SUCCESS; the next workflow's hdfsCheck sees
// that _SUCCESS and runs in turn.
func TestRealOozieSuccessChain(t *testing.T) {
	r := newReal(t, oozietest.Shared(t))
	now := t20.Add(30 * time.Minute)
	r.step(now, "produce", "consume")
	if st := r.state("produce", t20); st.Status != slot.Waiting {
		t.Fatalf("produce@20:00 is %s before its input, want WAITING", st.Status)
	}
	hdfstest.WriteFile(t, r.hdfs.Client(), "/real/input/2015-09-12T2000/_READY", "")
	began := time.Now()
	st := r.stepUntil(now, "produce", t20, slot.Running)
	submitted := time.Since(began)
	j, err := r.client.JobInfo(r.ctx, st.ExternalID)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := oozie.ParseConfiguration([]byte(j.Conf))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"user.name":  r.hdfs.User(),
		"nameNode":   r.hdfs.URL(""),
		"releaseDir": r.releaseDir,
		// Oozie expands ${nameNode} from the configuration and adds the
		// user for MapReduce (docs/oozie.md, "The real Oozie").
		"oozie.wf.application.path": r.hdfs.URL("/real/app/touch"),
		"mapreduce.job.user.name":   r.hdfs.User(),
		"outputDir":                 "/real/output/produce/2015091220",
		"celosWorkflowName":         "produce@2015-09-12T20:00Z",
		"year":                      "2015", "month": "09", "day": "12", "hour": "20", "minute": "00", "second": "00",
	}
	if diff := cmp.Diff(want, conf); diff != "" {
		t.Errorf("the configuration Oozie holds (-want +got):\n%s", diff)
	}
	if j.AppName != "produce@2015-09-12T20:00Z" || j.User != r.hdfs.User() {
		t.Errorf("Oozie job appName %q user %q", j.AppName, j.User)
	}
	r.stepUntil(now, "produce", t20, slot.Success)
	t.Logf("produce@20:00: READY to RUNNING in %v, to SUCCESS in %v", submitted.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	if _, err := r.hdfs.Client().Stat("/real/output/produce/2015091220/_SUCCESS"); err != nil {
		t.Errorf("the fs action wrote no _SUCCESS: %v", err)
	}
	r.stepUntil(now, "consume", t20, slot.Success)
	if _, err := r.hdfs.Client().Stat("/real/output/consume/2015091220/_SUCCESS"); err != nil {
		t.Errorf("consume wrote no _SUCCESS: %v", err)
	}
}

// TestRealOozieFailureRetried: a workflow ending in a kill node is KILLED
// in Oozie; the slot is retried once with a new job, then FAILURE.
func TestRealOozieFailureRetried(t *testing.T) {
	r := newReal(t, oozietest.Shared(t))
	now := t20.Add(30 * time.Minute)
	first := r.stepUntil(now, "failing", t20, slot.Running)
	j := r.waitJob(first.ExternalID, "KILLED")
	st := r.stepUntil(now, "failing", t20, slot.Waiting)
	if st.RetryCount != 1 {
		t.Errorf("after the first failure: retry count %d, want 1", st.RetryCount)
	}
	second := r.stepUntil(now, "failing", t20, slot.Running)
	if second.ExternalID == first.ExternalID {
		t.Errorf("the retry did not submit a new job: %s", second.ExternalID)
	}
	r.waitJob(second.ExternalID, "KILLED")
	final := r.stepUntil(now, "failing", t20, slot.Failure)
	if final.ExternalID != second.ExternalID {
		t.Errorf("FAILURE records job %s, want the retry %s", final.ExternalID, second.ExternalID)
	}
	var codes []string
	for _, a := range j.Actions {
		if a.ErrorCode != "" {
			codes = append(codes, a.Name+": "+a.ErrorCode+" "+a.ErrorMessage)
		}
	}
	if diff := cmp.Diff([]string{"fail: E0729 failing on purpose for 20"}, codes); diff != "" {
		t.Errorf("the failed action in Oozie (-want +got):\n%s", diff)
	}
}

// TestRealOozieKillSuspendRerun: celos's kill of a RUNNING slot kills the
// Oozie job; a job an operator suspends in Oozie is still running for
// celos, and succeeds once resumed; a rerun submits a new job.
func TestRealOozieKillSuspendRerun(t *testing.T) {
	r := newReal(t, oozietest.Shared(t))
	h := time.Hour
	now := t20.Add(h + 30*time.Minute) // long@20:00 and long@21:00
	a := r.stepUntil(now, "long", t20, slot.Running)
	b := r.stepUntil(now, "long", t20.Add(h), slot.Running)
	r.waitJob(a.ExternalID, "RUNNING")

	// Kill reaches Oozie.
	if err := r.engine.Kill(r.ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if st := r.state("long", t20); st.Status != slot.Killed {
		t.Errorf("long@20:00 is %s after kill, want KILLED", st.Status)
	}
	r.waitJob(a.ExternalID, "KILLED")

	// SUSPENDED is running; resumed, the job goes on and succeeds.
	r.waitJob(b.ExternalID, "RUNNING")
	r.jobAction(b.ExternalID, "suspend")
	r.waitJob(b.ExternalID, "SUSPENDED")
	r.step(now, "long")
	r.step(now, "long")
	if st := r.state("long", t20.Add(h)); st.Status != slot.Running || st.ExternalID != b.ExternalID {
		t.Errorf("with its job SUSPENDED, long@21:00 is %s (%s), want RUNNING (%s); problems %v", st.Status, st.ExternalID, b.ExternalID, r.engine.Problems("long"))
	}
	r.jobAction(b.ExternalID, "resume")
	r.release("21")
	r.stepUntil(now, "long", t20.Add(h), slot.Success)

	// A rerun of the SUCCESS slot submits a new job, which runs.
	if err := r.engine.Rerun(r.ctx, b.ID, now); err != nil {
		t.Fatal(err)
	}
	again := r.stepUntil(now, "long", t20.Add(h), slot.Running)
	if again.ExternalID == b.ExternalID {
		t.Errorf("the rerun did not submit a new job: %s", again.ExternalID)
	}
	r.stepUntil(now, "long", t20.Add(h), slot.Success)
	jobs, err := r.client.Jobs(r.ctx, oozie.Filter{Name: "long@2015-09-12T21:00Z"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Errorf("Oozie has %d jobs named long@2015-09-12T21:00Z, want 2 (the run and the rerun): %+v", len(jobs), jobs)
	}
}

// TestRealOozieRecoverAfterCrash: the server dies between Oozie accepting
// a job and the slot being recorded; the next step finds the real job by
// its celosWorkflowName instead of submitting a second one.
func TestRealOozieRecoverAfterCrash(t *testing.T) {
	r := newReal(t, oozietest.Shared(t))
	now := t20.Add(30 * time.Minute)
	hdfstest.WriteFile(t, r.hdfs.Client(), "/real/input/2015-09-12T2000/_READY", "")
	r.stepUntil(now, "produce", t20, slot.Ready)

	// What the crashed process did: recorded its intent, and Oozie took the job.
	id := slot.ID{Workflow: "produce", Time: t20}
	if err := r.db.PutIntent(id, store.Intent{Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	w, err := r.engine.Workflow("produce")
	if err != nil {
		t.Fatal(err)
	}
	jobID, err := oozie.NewService(r.defaults, nil).Submit(r.ctx, w, id)
	if err != nil {
		t.Fatal(err)
	}
	r.step(now, "produce")
	st := r.state("produce", t20)
	if st.Status != slot.Running && st.Status != slot.Success {
		t.Fatalf("after recovery produce@20:00 is %s, want RUNNING; problems %v", st.Status, r.engine.Problems("produce"))
	}
	if st.ExternalID != jobID {
		t.Errorf("the slot records %q, want the job submitted before the crash %q", st.ExternalID, jobID)
	}
	r.stepUntil(now, "produce", t20, slot.Success)
	jobs, err := r.client.Jobs(r.ctx, oozie.Filter{Name: "produce@2015-09-12T20:00Z"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string // this test's, not another test's on the shared Oozie
	for _, j := range jobs {
		info, err := r.client.JobInfo(r.ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if conf, err := oozie.ParseConfiguration([]byte(info.Conf)); err == nil && conf["releaseDir"] == r.releaseDir {
			ids = append(ids, j.ID)
		}
	}
	if diff := cmp.Diff([]string{jobID}, ids); diff != "" {
		t.Errorf("Oozie's jobs for the slot (-want +got): the slot was submitted twice\n%s", diff)
	}
}

// TestRealOozieStoppedMidStep: Oozie goes away with a READY and a RUNNING
// slot; nothing fails, the errors are recorded, and once Oozie is back
// (same database) the READY slot is submitted and the RUNNING one finishes.
func TestRealOozieStoppedMidStep(t *testing.T) {
	shared := oozietest.Shared(t)
	env := oozietest.StartT(t, oozietest.Options{HDFS: shared.HDFS})
	r := newReal(t, env)
	now := t20.Add(30 * time.Minute)
	running := r.stepUntil(now, "long", t20, slot.Running)
	r.waitJob(running.ExternalID, "RUNNING")
	hdfstest.WriteFile(t, r.hdfs.Client(), "/real/input/2015-09-12T2000/_READY", "")
	r.stepUntil(now, "produce", t20, slot.Ready)

	r.oozie.Kill() // a crash: no clean shutdown
	r.step(now, "long", "produce")
	r.step(now, "long", "produce")
	if st := r.state("produce", t20); st.Status != slot.Ready {
		t.Errorf("Oozie down: produce@20:00 is %s, want READY", st.Status)
	}
	if st := r.state("long", t20); st.Status != slot.Running {
		t.Errorf("Oozie down: long@20:00 is %s, want RUNNING", st.Status)
	}
	if !hasProblem(r.engine.Problems("produce"), "", "") || !hasProblem(r.engine.Problems("long"), "status", "") {
		t.Errorf("no problems recorded while Oozie is down: %v %v", r.engine.Problems("produce"), r.engine.Problems("long"))
	}

	began := time.Now()
	if err := r.oozie.Restart(r.ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Oozie restart: %v", time.Since(began).Round(time.Millisecond))
	r.stepUntil(now, "produce", t20, slot.Success)
	r.release("20")
	r.stepUntil(now, "long", t20, slot.Success)
	t.Logf("Oozie restart to both slots SUCCESS: %v", time.Since(began).Round(time.Millisecond))
	for _, wf := range []string{"produce", "long"} {
		if p := r.engine.Problems(wf); len(p) != 0 {
			t.Errorf("%s: problems left after Oozie came back: %v", wf, p)
		}
	}
}
