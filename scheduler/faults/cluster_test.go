package faults

// Three `celos server` instances on one PostgreSQL database (docs/ha.md):
// kill -9 of an owner mid-step, SIGSTOP of an owner past its lease, the
// database restarted and unreachable for a minute, a rolling restart.
// Submissions are counted on the Oozie fake: every slot must end with
// exactly one Oozie job, the one it records.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/cluster"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
)

// Cluster fault installation: clWorkflows hourly Oozie workflows, clHours
// slots each.
const (
	clWorkflows = 9
	clHours     = 4
	// clLease is the instances' lease: long enough that a loaded 2-core
	// machine does not lose leases by starvation, short enough for tests.
	clLease = 3 * time.Second
)

var clT0 = time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)

func clNow() url.Values {
	return url.Values{"time": {slot.FormatTime(clT0.Add(clHours*time.Hour - 30*time.Minute))}}
}

func clWorkflowIDs() []string {
	out := make([]string, clWorkflows)
	for i := range out {
		out[i] = fmt.Sprintf("w%02d", i)
	}
	return out
}

// clusterRig is a PostgreSQL server, a fake Oozie, a workflows directory
// and the instances started on them.
type clusterRig struct {
	t       *testing.T
	pg      *pgtest.Server
	dsn     string
	base    string
	fake    *ooziefake.Server
	members map[string]*server
	flags   []string // extra flags of every instance
}

func newClusterRig(t *testing.T) *clusterRig { return newClusterRigWith(t, "") }

// newClusterRigWith is newClusterRig; with runs set, the workflows run on
// the command service instead, each run waiting for the file runs.gate
// to exist, then appending its external ID to runs/<workflow>-<hour>.
func newClusterRigWith(t *testing.T, runs string) *clusterRig {
	t.Helper()
	if testing.Short() {
		t.Skip("starts celos server processes and PostgreSQL")
	}
	pg := pgtest.StartT(t, pgtest.Options{})
	fake, err := ooziefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.SetPlan(func(map[string]string) []string { return []string{ooziefake.Running} }) // until told
	r := &clusterRig{t: t, pg: pg, dsn: pg.CreateDB(t), base: t.TempDir(), fake: fake, members: map[string]*server{}}
	p := fixture.Project("cluster")
	for _, id := range clWorkflowIDs() {
		w := fixture.Hourly(id)
		w.SchedulingStrategy.Concurrency = clHours
		w.StartTime = clT0
		w.ExternalService = fixture.Oozie(map[string]string{"user.name": "celos", "oozie.wf.application.path": "hdfs:///apps/cluster"})
		w.ExternalService.URL = fake.URL
		if runs != "" {
			w.ExternalService = fixture.Command("sh", "-c", `while [ ! -e '`+runs+`.gate' ]; do sleep 0.05; done; `+
				`echo "$CELOS_EXTERNAL_ID" >> '`+runs+`'/"$CELOS_WORKFLOW-$CELOS_HOUR"`)
		}
		p.Workflows = append(p.Workflows, w)
	}
	fixture.Write(t, filepath.Join(r.base, "wf"), p)
	return r
}

// start starts instance id (again) and waits until it answers.
func (r *clusterRig) start(id string) *server {
	r.t.Helper()
	dir := filepath.Join(r.base, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	s := startServer(r.t, dir, append([]string{"--workflows", filepath.Join(r.base, "wf"), "--db", r.dsn,
		"--instance-id", id, "--lease", clLease.String()}, r.flags...)...)
	r.members[id] = s
	return s
}

// running lists the instances whose process runs, sorted.
func (r *clusterRig) running() []string {
	var out []string
	for id, s := range r.members {
		select {
		case <-s.done:
		default:
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// healthInstance is the "instance" of GET /healthz.
type healthInstance struct {
	ID    string   `json:"id"`
	Live  []string `json:"live"`
	Owned []string `json:"owned"`
}

func (r *clusterRig) health(id string) (healthInstance, error) {
	resp, err := http.Get(r.members[id].URL + "/healthz")
	if err != nil {
		return healthInstance{}, err
	}
	defer resp.Body.Close()
	var h struct {
		Instance *healthInstance `json:"instance"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return healthInstance{}, err
	}
	if h.Instance == nil {
		return healthInstance{}, fmt.Errorf("instance %s: /healthz shows no instance", id)
	}
	return *h.Instance, nil
}

// settled reports whether the instances ids see each other as the live
// instances and each owns exactly its rendezvous share of the workflows;
// it returns the owner of each workflow.
func (r *clusterRig) settled(ids ...string) (map[string]string, bool) {
	live := append([]string(nil), ids...)
	sort.Strings(live)
	owner := map[string]string{}
	ok := true
	for _, id := range ids {
		h, err := r.health(id)
		if err != nil {
			return nil, false
		}
		ok = ok && slices.Equal(h.Live, live)
		for _, wf := range h.Owned {
			if _, dup := owner[wf]; dup || cluster.Owner(wf, live) != id {
				ok = false
			}
			owner[wf] = id
		}
	}
	return owner, ok && len(owner) == clWorkflows
}

func (r *clusterRig) waitSettled(within time.Duration, ids ...string) map[string]string {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if owner, ok := r.settled(ids...); ok {
			return owner
		}
		if time.Now().After(deadline) {
			owner, _ := r.settled(ids...)
			r.t.Fatalf("instances %v do not share the %d workflows within %s: %v", ids, clWorkflows, within, owner)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stepAll posts one step to each of the instances ids.
func (r *clusterRig) stepAll(ids ...string) {
	r.t.Helper()
	for _, id := range ids {
		if code, body := r.members[id].post("/scheduler", clNow()); code != 200 {
			r.t.Fatalf("step on %s: %d %s\n%s", id, code, body, r.members[id].stderr)
		}
	}
}

// statuses counts the slots by status, read through instance id.
func (r *clusterRig) statuses(id string) map[string]int {
	r.t.Helper()
	out := map[string]int{}
	for _, wf := range clWorkflowIDs() {
		for _, sl := range r.members[id].slots(wf, clT0, clT0.Add(clHours*time.Hour)) {
			out[sl.Status]++
		}
	}
	return out
}

// stepUntil steps the instances until every slot has status want (read
// through the first), within a generous deadline.
func (r *clusterRig) stepUntil(want string, ids ...string) {
	r.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r.stepAll(ids...)
		got := r.statuses(ids[0])
		if got[want] == clWorkflows*clHours {
			return
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, id := range ids {
				for _, line := range strings.Split(r.members[id].stderr.String(), "\n") {
					if strings.Contains(line, "WARN") || strings.Contains(line, "ERROR") || strings.Contains(line, "FAILURE") {
						fmt.Fprintf(&logs, "%s: %s\n", id, line)
					}
				}
			}
			r.t.Fatalf("slots %v, want all %d %s; the instances' warnings:\n%s", got, clWorkflows*clHours, want, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOnceEach checks, through instance id, that every slot has exactly
// one Oozie job and records it.
func (r *clusterRig) checkOnceEach(id string) {
	r.t.Helper()
	byName := map[string][]string{}
	for _, j := range r.fake.Jobs() {
		name := j.Conf[oozie.WorkflowNameProperty]
		byName[name] = append(byName[name], j.ID)
	}
	if n := len(r.fake.Jobs()); n != clWorkflows*clHours {
		r.t.Errorf("%d Oozie jobs for %d slots", n, clWorkflows*clHours)
	}
	for _, wf := range clWorkflowIDs() {
		for tm, sl := range r.members[id].slots(wf, clT0, clT0.Add(clHours*time.Hour)) {
			st, _ := slot.ParseTime(tm)
			ids := byName[oozie.WorkflowName(slot.ID{Workflow: wf, Time: st})]
			if len(ids) != 1 || sl.ExternalID == nil || *sl.ExternalID != ids[0] {
				recorded := "no job"
				if sl.ExternalID != nil {
					recorded = *sl.ExternalID
				}
				r.t.Errorf("%s@%s records %s; Oozie has %v for it; what the instances logged of it:\n%s", wf, tm, recorded, ids, r.logsOf(wf+"@"+tm))
			}
		}
	}
}

// logsOf returns the lines of every instance's log that mention s, each
// prefixed with the instance's id.
func (r *clusterRig) logsOf(s string) string {
	var b strings.Builder
	for id, m := range r.members {
		for _, line := range strings.Split(m.stderr.String(), "\n") {
			if strings.Contains(line, s) {
				fmt.Fprintf(&b, "%s: %s\n", id, line)
			}
		}
	}
	return b.String()
}

// finish lets every Oozie job succeed and steps until every slot is SUCCESS.
func (r *clusterRig) finish(ids ...string) {
	r.t.Helper()
	for _, j := range r.fake.Jobs() {
		_ = r.fake.SetStatus(j.ID, ooziefake.Succeeded)
	}
	r.stepUntil("SUCCESS", ids...)
	r.checkOnceEach(ids[0])
}

// jobsOf counts the Oozie jobs of the workflows owner holds.
func (r *clusterRig) jobsOf(owner map[string]string, id string) int {
	n := 0
	for _, j := range r.fake.Jobs() {
		wf, _, _ := strings.Cut(j.Conf[oozie.WorkflowNameProperty], "@")
		if owner[wf] == id {
			n++
		}
	}
	return n
}

// metric reads a counter or gauge of instance id's /metrics.
func (r *clusterRig) metric(id, name string) float64 {
	r.t.Helper()
	resp, err := http.Get(r.members[id].URL + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	r.t.Fatalf("%s: no metric %s", id, name)
	return 0
}

func (r *clusterRig) startThree() map[string]string {
	r.t.Helper()
	for _, id := range []string{"a", "b", "c"} {
		r.start(id)
	}
	return r.waitSettled(4*clLease, "a", "b", "c")
}

func others(owner string) []string {
	var out []string
	for _, id := range []string{"a", "b", "c"} {
		if id != owner {
			out = append(out, id)
		}
	}
	return out
}

// TestClusterKill9Owner: the owner of w00 is killed with SIGKILL while its
// step submits; the two others take its workflows over within 2× the
// lease, resolve its submit intents (Oozie, by celosWorkflowName) and end
// with exactly one job per slot, all SUCCESS.
func TestClusterKill9Owner(t *testing.T) {
	r := newClusterRig(t)
	owner := r.startThree()
	r.stepAll("a", "b", "c") // WAITING → READY
	victim := owner["w00"]
	r.fake.SetDelay(50 * time.Millisecond) // a step of clHours × 3 submissions takes a while
	go func() {
		if resp, err := http.Post(r.members[victim].URL+"/scheduler?"+clNow().Encode(), "", nil); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for r.jobsOf(owner, victim) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	r.members[victim].kill9()
	killed := time.Now()
	r.fake.SetDelay(0)
	t.Logf("killed %s with %d of its jobs submitted", victim, r.jobsOf(owner, victim))
	rest := others(victim)
	r.waitSettled(2*clLease, rest...)
	t.Logf("take-over after %s (lease %s)", time.Since(killed).Round(time.Millisecond), clLease)
	r.stepUntil("RUNNING", rest...)
	r.checkOnceEach(rest[0])
	r.finish(rest...)
}

// stepLogLine starts the line a server logs at the end of a step
// (loop.Stepper.Step).
const stepLogLine = "level=INFO msg=step "

// TestClusterSIGSTOPOwner: the owner of w00 is stopped (SIGSTOP) in the
// middle of a step, past its lease; the others take over and submit the
// rest; when it is continued, its step's remaining submissions and writes
// are refused (counted), nothing runs twice, and it rejoins.
func TestClusterSIGSTOPOwner(t *testing.T) {
	r := newClusterRig(t)
	owner := r.startThree()
	r.stepAll("a", "b", "c")
	victim := owner["w00"]
	// Each submission waits 1 s in the fake before it is recorded: the
	// victim is stopped with the rest of its step still to do even when
	// this goroutine is starved for most of a second (300 ms was too
	// small a margin under CPU starvation).
	r.fake.SetDelay(time.Second)
	steps0 := strings.Count(r.members[victim].stderr.String(), stepLogLine)
	stepDone := make(chan int, 1)
	go func() {
		resp, err := http.Post(r.members[victim].URL+"/scheduler?"+clNow().Encode(), "", nil)
		if err != nil {
			stepDone <- 0
			return
		}
		resp.Body.Close()
		stepDone <- resp.StatusCode
	}()
	deadline := time.Now().Add(60 * time.Second)
	for r.jobsOf(owner, victim) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	pid := r.members[victim].cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r.fake.SetDelay(0)
	rest := others(victim)
	r.waitSettled(2*clLease+clLease/2, rest...) // (its heartbeat must go stale first)
	r.stepUntil("RUNNING", rest...)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-stepDone:
		if code != 200 {
			t.Fatalf("the resumed instance's step answered %d\n%s", code, r.members[victim].stderr)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the resumed instance's step did not end\n%s", r.members[victim].stderr)
	}
	// The server logs the step before it answers, but its stderr reaches
	// the buffer through a pipe: wait for the step's line.
	log := r.members[victim].stderr.String()
	for deadline := time.Now().Add(30 * time.Second); strings.Count(log, stepLogLine) <= steps0; log = r.members[victim].stderr.String() {
		if time.Now().After(deadline) {
			t.Fatalf("the resumed instance answered its step but logged no step line in 30 s\n%s", log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	dropped := strings.Count(log, "dropped: another instance owns the workflow now")
	fenced := r.metric(victim, "celos_cluster_fenced_writes_total")
	t.Logf("resumed %s: %d submissions or writes dropped, %v writes fenced", victim, dropped, fenced)
	if dropped == 0 {
		t.Errorf("the resumed instance dropped nothing: it should have refused the rest of its step\n%s", log)
	}
	r.checkOnceEach(rest[0])
	// It rejoins: the three share the workflows again.
	r.waitSettled(4*clLease, "a", "b", "c")
	r.finish("a", "b", "c")
}

// TestClusterPostgresDown: PostgreSQL is killed and stays down for a
// minute: the instances keep answering (the API's reads that need no
// database, /healthz), submit nothing, and once it is back they take their
// workflows again and run every slot once.
func TestClusterPostgresDown(t *testing.T) {
	r := newClusterRig(t)
	r.startThree()
	r.stepAll("a", "b", "c") // READY
	r.pg.Kill()
	down := time.Now()
	before := len(r.fake.Jobs())
	for time.Since(down) < time.Minute {
		for _, id := range r.running() {
			if _, err := r.health(id); err != nil {
				t.Fatalf("%s: /healthz while the database is down: %v", id, err)
			}
			resp, err := http.Get(r.members[id].URL + "/workflow-list")
			if err != nil {
				t.Fatalf("%s: /workflow-list while the database is down: %v", id, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s: /workflow-list answered %d while the database is down", id, resp.StatusCode)
			}
			// A step commits nothing and submits nothing.
			if resp, err := http.Post(r.members[id].URL+"/scheduler?"+clNow().Encode(), "", nil); err == nil {
				resp.Body.Close()
			}
		}
		time.Sleep(time.Second)
	}
	if n := len(r.fake.Jobs()); n != before {
		t.Fatalf("%d Oozie jobs submitted while the database was down", n-before)
	}
	if err := r.pg.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.waitSettled(4*clLease, "a", "b", "c")
	r.stepUntil("RUNNING", "a", "b", "c")
	r.checkOnceEach("a")
	r.finish("a", "b", "c")
}

// TestClusterRollingRestart: each instance in turn is stopped (SIGTERM)
// and started again while slots run; the others take its workflows at once
// (it released them) and give them back; every slot runs once.
func TestClusterRollingRestart(t *testing.T) {
	r := newClusterRig(t)
	r.startThree()
	r.stepAll("a", "b", "c") // READY
	r.fake.SetDelay(20 * time.Millisecond)
	for _, id := range []string{"a", "b", "c"} {
		rest := others(id)
		go func() { // a step in flight while it stops
			if resp, err := http.Post(r.members[id].URL+"/scheduler?"+clNow().Encode(), "", nil); err == nil {
				resp.Body.Close()
			}
		}()
		r.members[id].stop()
		r.waitSettled(2*clLease, rest...)
		r.stepAll(rest...)
		r.start(id)
		r.waitSettled(4*clLease, "a", "b", "c")
	}
	r.fake.SetDelay(0)
	r.stepUntil("RUNNING", "a", "b", "c")
	r.checkOnceEach("b")
	r.finish("a", "b", "c")
}

// TestClusterKill9OwnerCommand: the same kill -9 with the command service
// (RJM-style job rows): the jobs the killed instance started run on, on
// its host; the others take its workflows over and report those jobs as
// running on it (it is within the grace); when it comes back under its id
// it publishes their ends. Every slot ran exactly once and is SUCCESS.
func TestClusterKill9OwnerCommand(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	r := newClusterRigWith(t, runs)
	if err := os.WriteFile(runs+".gate", nil, 0o644); err != nil { // jobs end at once
		t.Fatal(err)
	}
	owner := r.startThree()
	r.stepAll("a", "b", "c") // READY
	victim := owner["w00"]
	go func() {
		if resp, err := http.Post(r.members[victim].URL+"/scheduler?"+clNow().Encode(), "", nil); err == nil {
			resp.Body.Close()
		}
	}()
	jobsDir := filepath.Join(r.base, victim, "jobs")
	deadline := time.Now().Add(60 * time.Second)
	for countJobs(jobsDir) < 2 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Microsecond)
	}
	r.members[victim].kill9()
	t.Logf("killed %s with %d of its command jobs started", victim, countJobs(jobsDir))
	rest := others(victim)
	r.waitSettled(2*clLease, rest...)
	r.stepAll(rest...)
	r.start(victim) // back within the grace: it publishes its jobs' ends
	r.waitSettled(4*clLease, "a", "b", "c")
	r.stepUntil("SUCCESS", "a", "b", "c")
	for _, wf := range clWorkflowIDs() {
		slots := r.members["a"].slots(wf, clT0, clT0.Add(clHours*time.Hour))
		if checkRanOnce(t, runs, wf, clT0, clHours, slots, ""); t.Failed() {
			t.Logf("what the instances logged of %s:\n%s", wf, r.logsOf(wf+"@"))
		}
	}
}

// TestClusterCommandHostLost: the instance running command jobs is killed
// and does not come back: once it has been silent for longer than
// --job-grace its running jobs are declared lost, and their slots follow
// the retry rules (here none: FAILURE); every other slot is SUCCESS, and
// nothing ran twice.
func TestClusterCommandHostLost(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	r := newClusterRigWith(t, runs)
	r.flags = []string{"--job-grace", (2 * clLease).String()}
	owner := r.startThree()
	r.stepAll("a", "b", "c") // READY
	victim := owner["w00"]
	r.stepAll(victim) // its slots RUNNING, their jobs on its host, waiting for the gate
	r.members[victim].kill9()
	rest := others(victim)
	r.waitSettled(2*clLease, rest...)
	// The others' jobs wait too; the victim's run on after the verdict.
	r.stepAll(rest...)
	st := r.statuses(rest[0])
	if st["RUNNING"] != clWorkflows*clHours {
		t.Fatalf("slots %v, want all RUNNING before the gate opens", st)
	}
	deadline := time.Now().Add(90 * time.Second)
	for { // the victim's jobs are declared lost after the grace
		r.stepAll(rest...)
		if r.statuses(rest[0])["FAILURE"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job of the silent instance declared lost: %v", r.statuses(rest[0]))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := os.WriteFile(runs+".gate", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		r.stepAll(rest...)
		st := r.statuses(rest[0])
		ran := 0
		for _, wf := range clWorkflowIDs() {
			for h := 0; h < clHours; h++ {
				ran += len(readLines(t, filepath.Join(runs, fmt.Sprintf("%s-%02d", wf, h))))
			}
		}
		if st["SUCCESS"]+st["FAILURE"] == clWorkflows*clHours && ran == clWorkflows*clHours {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots %v, want all final", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, wf := range clWorkflowIDs() {
		want := "SUCCESS"
		if owner[wf] == victim {
			want = "FAILURE" // its jobs were declared lost
		}
		for tm, sl := range r.members[rest[0]].slots(wf, clT0, clT0.Add(clHours*time.Hour)) {
			if sl.Status != want {
				t.Errorf("%s@%s is %s, want %s", wf, tm, sl.Status, want)
			}
		}
		for h := 0; h < clHours; h++ {
			if lines := readLines(t, filepath.Join(runs, fmt.Sprintf("%s-%02d", wf, h))); len(lines) != 1 {
				t.Errorf("%s hour %02d ran %d times: %v", wf, h, len(lines), lines)
			}
		}
	}
	if log := r.members[rest[0]].stderr.String() + r.members[rest[1]].stderr.String(); !strings.Contains(log, "command job declared lost") {
		t.Error("no instance logged a lost command job")
	}
}

// TestClusterOperatorsOnAnyInstance: rerun, pause and kill served by an
// instance that does not own the workflow take effect: the owner reruns
// the slot, submits nothing for the paused workflow until it is resumed,
// and does not overwrite a kill.
func TestClusterOperatorsOnAnyInstance(t *testing.T) {
	r := newClusterRig(t)
	owner := r.startThree()
	r.stepUntil("RUNNING", "a", "b", "c")
	r.finish("a", "b", "c")
	t00 := slot.FormatTime(clT0)
	named := func(wf string) int {
		n := 0
		for _, j := range r.fake.Jobs() {
			if j.Conf[oozie.WorkflowNameProperty] == oozie.WorkflowName(slot.ID{Workflow: wf, Time: clT0}) {
				n++
			}
		}
		return n
	}
	status := func(via, wf string) slotJSON {
		return r.members[via].slots(wf, clT0, clT0.Add(clHours*time.Hour))[t00]
	}
	x := owner["w00"]
	var n string // an instance that owns neither w00 nor w01
	for _, id := range others(x) {
		if owner["w01"] != id {
			n = id
		}
	}
	if n == "" {
		t.Skipf("w00 and w01 hash to all three instances between them: %v", owner) // (fixed names: never)
	}
	post := func(path string, q url.Values) {
		t.Helper()
		if code, body := r.members[n].post(path, q); code != 200 {
			t.Fatalf("POST %s on %s: %d %s", path, n, code, body)
		}
	}
	post("/rerun", url.Values{"id": {"w00"}, "time": {t00}})
	post("/pause", url.Values{"id": {"w01"}, "paused": {"true"}})
	post("/rerun", url.Values{"id": {"w01"}, "time": {t00}})
	if st := status(n, "w00"); st.Status != "WAITING" {
		t.Fatalf("w00@%s read through %s after its rerun: %s", t00, n, st.Status)
	}
	deadline := time.Now().Add(60 * time.Second)
	for status(x, "w00").Status != "RUNNING" {
		if time.Now().After(deadline) {
			t.Fatalf("the owner %s did not rerun w00@%s: %s", x, t00, status(x, "w00").Status)
		}
		r.stepAll("a", "b", "c")
	}
	if got := named("w00"); got != 2 {
		t.Errorf("w00@%s has %d Oozie jobs after one rerun, want 2", t00, got)
	}
	r.stepAll("a", "b", "c")
	if got := named("w01"); got != 1 || status(n, "w01").Status == "RUNNING" {
		t.Fatalf("paused w01@%s: %d jobs, %s; want 1 job, not RUNNING", t00, got, status(n, "w01").Status)
	}
	post("/pause", url.Values{"id": {"w01"}, "paused": {"false"}})
	for status(n, "w01").Status != "RUNNING" {
		if time.Now().After(deadline) {
			t.Fatalf("w01@%s not rerun once resumed: %s", t00, status(n, "w01").Status)
		}
		r.stepAll("a", "b", "c")
	}
	// Kill the rerun of w00 through n: the owner keeps it KILLED.
	post("/kill", url.Values{"id": {"w00"}, "time": {t00}})
	r.stepAll("a", "b", "c")
	r.stepAll("a", "b", "c")
	if st := status(x, "w00"); st.Status != "KILLED" {
		t.Fatalf("w00@%s after a kill on %s and two steps: %s", t00, n, st.Status)
	}
	killed := 0
	for _, j := range r.fake.Jobs() {
		if j.Killed {
			killed++
		}
	}
	if killed != 1 {
		t.Errorf("%d Oozie jobs killed, want 1", killed)
	}
}
