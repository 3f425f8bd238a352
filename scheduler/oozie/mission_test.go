package oozie_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/oozietest"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
)

// celosBinary builds cmd/celos once per test binary;
// TestRealOozieCelosBinary, whose subtests use it, removes it.
var celosBinary = sync.OnceValues(func() (string, error) { return servertest.BuildCelos("celos-oozie-bin-") })

func celos(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := celosBinary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("celos %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// missionCUE is the project a team writes: an hourly workflow that waits
// for its input in HDFS and runs hdfs/workflow.xml, deployed under
// /mission-apps/mission as the scaffold lays it out (an application path
// with no scheme: Oozie takes the file system from its own configuration).
const missionCUE = `package mission

import "celos.dev/celos"

project: "mission"

workflows: celos.#Workflows

workflows: ingest: {
	schedule:  celos.#Hourly
	startTime: %q
	trigger: celos.#HdfsCheck & {path: "/mission/input/${year}${month}${day}${hour}/_READY"}
	externalService: celos.#Oozie & {properties: {
		"oozie.wf.application.path": "/mission-apps/mission/workflow.xml"
		outputDir:                   "/mission/output/${year}${month}${day}${hour}"
	}}
}
`

// TestRealOozieCelosBinary runs the tests that need the celos binary.
func TestRealOozieCelosBinary(t *testing.T) {
	t.Cleanup(func() {
		if bin, err := celosBinary(); err == nil {
			os.RemoveAll(filepath.Dir(bin))
		}
	})
	t.Run("mission", testRealOozieMission)
	t.Run("kill9 mid-submit", testRealOozieKill9MidSubmit)
	t.Run("kerberos", testSPNEGOCelosServer) // the Oozie fake: no JVM
	t.Run("kerberos keytab", testSPNEGOCelosServerKeytab)
	t.Run("kerberos real oozie", testRealOozieCelosServerKerberos)
}

// testRealOozieMission is the whole mission path once, end to end, with
// the celos binary: `celos init` a project, `celos deploy` it to a target
// (workflows file on local disk, Oozie directory in the real HDFS), `celos
// server --autoSchedule 1` schedules it, the slot's input lands, the real
// Oozie runs the deployed workflow.xml, whose fs action writes the slot's
// _SUCCESS, and the server's API shows the slot SUCCESS.
func testRealOozieMission(t *testing.T) {
	env := oozietest.Shared(t)
	c := env.HDFS
	dir := t.TempDir()
	proj := filepath.Join(dir, "mission")
	celos(t, "init", proj)
	hour := time.Now().UTC().Truncate(time.Hour)
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(proj, "workflows.cue"), fmt.Sprintf(missionCUE, hour.Format(time.RFC3339)))
	// The scaffold's test case is about the example workflows replaced
	// above.
	if err := os.Remove(filepath.Join(proj, "tests.cue")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(proj, "hdfs", "workflow.xml"), realApps["touch"])

	// The installation: target file, defaults naming the real Oozie.
	wfDir, defDir := filepath.Join(dir, "etc", "workflows"), filepath.Join(dir, "etc", "defaults")
	write(filepath.Join(defDir, "defaults.json"), fmt.Sprintf(`{
  "CELOS_DEFAULT_HDFS": %q,
  "CELOS_DEFAULT_OOZIE": %q,
  "CELOS_DEFAULT_OOZIE_PROPERTIES": {"user.name": %q, "nameNode": %q}
}`, c.URL(""), env.Oozie.URL(), c.User(), c.URL("")))
	fileURL := func(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }
	write(filepath.Join(dir, "target.json"), fmt.Sprintf(`{
  "hadoop.core-site.xml": %q,
  "hadoop.hdfs-site.xml": %q,
  "workflows.dir.uri": %q,
  "defaults.dir.uri": %q,
  "hdfs.root": "/mission-apps"
}`, fileURL(filepath.Join(c.ConfDir(), "core-site.xml")), fileURL(filepath.Join(c.ConfDir(), "hdfs-site.xml")), fileURL(wfDir), fileURL(defDir)))
	if err := os.MkdirAll(wfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/mission", "/mission-apps"} {
		if err := c.Client().RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}

	began := time.Now()
	celos(t, "deploy", "--target", fileURL(filepath.Join(dir, "target.json")), "--deploy-dir", proj, "--quiet")
	if _, err := c.Client().Stat("/mission-apps/mission/workflow.xml"); err != nil {
		t.Fatalf("deploy put no workflow.xml in HDFS: %v", err)
	}
	t.Logf("celos deploy: %v", time.Since(began).Round(time.Millisecond))

	bin, err := celosBinary()
	if err != nil {
		t.Fatal(err)
	}
	urlFile := filepath.Join(dir, "url")
	srv := exec.Command(bin, "server", "--port", "0", "--workflows", wfDir, "--defaults", defDir,
		"--db", filepath.Join(dir, "db"), "--logs", "", "--url-file", urlFile, "--autoSchedule", "1",
		"--hadoop-conf", c.ConfDir())
	var log servertest.LockedBuffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			srv.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("celos server log:\n%s", log.String())
		}
	})
	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if b, err := os.ReadFile(urlFile); err == nil && len(b) > 0 {
			base = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			t.Fatalf("celos server did not start in 30 s:\n%s", log.String())
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The slot's input lands; the server does the rest.
	hdfstest.WriteFile(t, c.Client(), "/mission/input/"+hour.Format("2006010215")+"/_READY", "")
	landed := time.Now()
	var slot struct {
		Status, ExternalID string
	}
	deadline = time.Now().Add(90 * time.Second)
	for slot.Status != "SUCCESS" {
		if time.Now().After(deadline) {
			t.Fatalf("slot ingest@%s is %q after 90 s", hour.Format(time.RFC3339), slot.Status)
		}
		time.Sleep(200 * time.Millisecond)
		slot.Status, slot.ExternalID = slotState(t, base, "ingest", hour)
	}
	t.Logf("input landed to SUCCESS through celos server and the real Oozie: %v", time.Since(landed).Round(time.Millisecond))
	if _, err := c.Client().Stat("/mission/output/" + hour.Format("2006010215") + "/_SUCCESS"); err != nil {
		t.Errorf("the deployed workflow wrote no _SUCCESS: %v", err)
	}
	cl, err := oozie.NewClient(env.Oozie.URL(), oozie.WithAuth(oozie.SimpleAuth{User: c.User()}))
	if err != nil {
		t.Fatal(err)
	}
	j, err := cl.JobInfo(t.Context(), slot.ExternalID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != "SUCCEEDED" || j.AppName != "ingest@"+oozie.PrettyTime(hour) || !strings.HasSuffix(j.AppPath, "/mission-apps/mission/workflow.xml") {
		t.Errorf("Oozie's job: status %s, appName %s, appPath %s", j.Status, j.AppName, j.AppPath)
	}
}

// slotState reads one slot through the server's API (/workflow-slots).
func slotState(t *testing.T, base, wf string, at time.Time) (status, externalID string) {
	t.Helper()
	q := url.Values{"id": {wf}, "start": {at.Add(-time.Minute).Format(time.RFC3339)}, "end": {at.Add(time.Minute).Format(time.RFC3339)}}
	resp, err := http.Get(base + "/workflow-slots?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Slots []struct {
			Time       string `json:"time"`
			Status     string `json:"status"`
			ExternalID string `json:"externalID"`
		} `json:"slots"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET /workflow-slots: %s: %v", resp.Status, err)
	}
	for _, s := range out.Slots {
		if tm, err := time.Parse(time.RFC3339, s.Time); err == nil && tm.Equal(at) {
			return s.Status, s.ExternalID
		}
	}
	return "", ""
}

// testRealOozieKill9MidSubmit kills `celos server` with SIGKILL while its
// step submits 8 slots to the real Oozie, then starts it again: every
// slot ends with exactly one Oozie job, the one it records. The jobs Oozie
// accepted just before the kill are found by Recover (jobs?filter=name=
// <celosWorkflowName>) from the submit intents left on disk. (The slots
// whose intent has no job cost a scan of the user's recent jobs each, one
// info call per job: kept small here, see docs/oozie.md.)
func testRealOozieKill9MidSubmit(t *testing.T) {
	env := oozietest.Shared(t)
	c := env.HDFS
	dir := t.TempDir()
	for name, xml := range realApps {
		hdfstest.WriteFile(t, c.Client(), "/real/app/"+name+"/workflow.xml", xml)
	}
	const n = 8
	p := bulkProject("k9", "touch")
	p.Workflows[0].StartTime = t20.Add(-(n - 1) * time.Hour)
	p.Workflows[0].SchedulingStrategy.Concurrency = n
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	wfDir := filepath.Join(dir, "wf")
	if err := os.MkdirAll(wfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wfDir, "k9.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "defaults.json"), []byte(fmt.Sprintf(
		`{"CELOS_DEFAULT_OOZIE": %q, "CELOS_DEFAULT_OOZIE_PROPERTIES": {"user.name": %q, "nameNode": %q}}`,
		env.Oozie.URL(), c.User(), c.URL(""))), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, err := oozie.NewClient(env.Oozie.URL(), oozie.WithAuth(oozie.SimpleAuth{User: c.User()}))
	if err != nil {
		t.Fatal(err)
	}
	jobsByName := func() map[string][]string {
		jobs, err := cl.Jobs(t.Context(), oozie.Filter{User: c.User()}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, j := range jobs {
			if strings.HasPrefix(j.AppName, "k9@") {
				out[j.AppName] = append(out[j.AppName], j.ID)
			}
		}
		return out
	}
	now := url.Values{"time": {slot.FormatTime(t20.Add(30 * time.Minute))}}

	s := startCelosServer(t, dir, wfDir)
	s.step(t, now) // WAITING -> READY
	go func() {    // READY -> RUNNING: 8 submissions, about 0.2 s each
		if resp, err := http.Post(s.url+"/scheduler?"+now.Encode(), "", nil); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for len(jobsByName()) < n/3 {
		if time.Now().After(deadline) {
			t.Fatalf("Oozie has %d jobs 60 s into the submit step", len(jobsByName()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill9()
	before := len(jobsByName())
	t.Logf("killed the server with %d of %d jobs in Oozie", before, n)

	s = startCelosServer(t, dir, wfDir)
	began := time.Now()
	s.step(t, now)
	t.Logf("the first step after the restart (recovery of %d intents): %v", n, time.Since(began).Round(time.Millisecond))
	deadline = time.Now().Add(90 * time.Second)
	for {
		s.step(t, now)
		done := 0
		for i := range n {
			if st, _ := slotState(t, s.url, "k9", t20.Add(-time.Duration(i)*time.Hour)); st == "SUCCESS" {
				done++
			}
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d slots SUCCESS 90 s after the restart\n%s", done, n, s.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	byName := jobsByName()
	for i := range n {
		at := t20.Add(-time.Duration(i) * time.Hour)
		_, ext := slotState(t, s.url, "k9", at)
		ids := byName["k9@"+oozie.PrettyTime(at)]
		if len(ids) != 1 || ids[0] != ext {
			t.Errorf("k9@%s records %q; Oozie has %v for it", oozie.PrettyTime(at), ext, ids)
		}
	}
	t.Logf("%d jobs recovered after the restart", strings.Count(s.log.String(), "recovered a job submitted before a crash"))
}

// celosServer is a `celos server` process stepped through POST /scheduler.
type celosServer struct {
	cmd  *exec.Cmd
	url  string
	log  *servertest.LockedBuffer
	done chan struct{}
}

func startCelosServer(t *testing.T, dir, wfDir string, args ...string) *celosServer {
	t.Helper()
	bin, err := celosBinary()
	if err != nil {
		t.Fatal(err)
	}
	urlFile := filepath.Join(dir, "url")
	os.Remove(urlFile)
	s := &celosServer{log: &servertest.LockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"server", "--port", "0", "--workflows", wfDir, "--defaults", filepath.Join(dir, "defaults.json"),
		"--db", filepath.Join(dir, "db"), "--logs", "", "--url-file", urlFile}, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
	})
	deadline := time.Now().Add(30 * time.Second)
	for s.url == "" {
		if b, err := os.ReadFile(urlFile); err == nil && len(b) > 0 {
			s.url = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			t.Fatalf("celos server did not start in 30 s:\n%s", s.log.String())
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return s
}

func (s *celosServer) step(t *testing.T, now url.Values) {
	t.Helper()
	resp, err := http.Post(s.url+"/scheduler?"+now.Encode(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /scheduler: %s\n%s", resp.Status, s.log.String())
	}
}

// stepUntilSuccess steps the server at now until slot wf@at is SUCCESS,
// and fails the test (naming what, with the server's log) if it is not
// within limit.
func (s *celosServer) stepUntilSuccess(t *testing.T, now url.Values, wf string, at time.Time, limit time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s.step(t, now)
		if st, _ := slotState(t, s.url, wf, at); st == "SUCCESS" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot not SUCCESS %v %s\n%s", limit, what, s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *celosServer) kill9() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}
