package command

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

var quiet = Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

func newWorkflow(argv ...string) *workflow.Workflow {
	return &workflow.Workflow{ID: "wc", ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: argv}}
}

var sid = slot.ID{Workflow: "wc", Time: time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)}

func newService(t *testing.T, dir string) *Service {
	t.Helper()
	s, err := New(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Wait(ctx)
	})
	return s
}

func waitDone(t *testing.T, s *Service, w *workflow.Workflow, ext string) external.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := s.Status(context.Background(), w, ext)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s did not end", ext)
	return external.Status{}
}

func TestRunSubstituteLogAndExitStatus(t *testing.T) {
	s := newService(t, t.TempDir())
	w := newWorkflow("sh", "-c", `echo "arg=$1 wf=$CELOS_WORKFLOW slot=$CELOS_SLOT_TIME y=$CELOS_YEAR$CELOS_MONTH$CELOS_DAY$CELOS_HOUR$CELOS_MINUTE$CELOS_SECOND in=$IN id=$CELOS_SLOT_ID"; echo oops >&2; exit 3`, "sh", "/in/${year}-${month}-${day}T${hour}")
	w.ExternalService.Env = map[string]string{"IN": "/data/${year}/${month}"}
	ext, err := s.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ext, "wc@20150913T134000Z.") {
		t.Fatalf("external ID %q", ext)
	}
	st := waitDone(t, s, w, ext)
	if st.Success || st.Detail != "exit 3" {
		t.Fatalf("status %+v", st)
	}
	out, err := s.ReadLog(ext, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "arg=/in/2015-09-13T13 wf=wc slot=2015-09-13T13:40:00.000Z y=20150913134000 in=/data/2015/09 id=wc@2015-09-13T13:40:00.000Z\noops\n"
	if string(out) != want {
		t.Fatalf("log %q\nwant %q", out, want)
	}
	if tail, _ := s.ReadLog(ext, 5); string(tail) != "oops\n" {
		t.Fatalf("tail %q", tail)
	}
	p, _ := s.LogPath(ext)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}

	ok, err := s.Submit(context.Background(), newWorkflow("true"), sid)
	if err != nil {
		t.Fatal(err)
	}
	if st := waitDone(t, s, w, ok); !st.Success || st.Detail != "exit 0" {
		t.Fatalf("status %+v", st)
	}
}

func TestWorkingDirectory(t *testing.T) {
	s := newService(t, t.TempDir())
	wd := t.TempDir()
	w := newWorkflow("sh", "-c", "pwd > out")
	w.ExternalService.Dir = wd
	ext, _ := s.Submit(context.Background(), w, sid)
	waitDone(t, s, w, ext)
	b, _ := os.ReadFile(filepath.Join(wd, "out"))
	if strings.TrimSpace(string(b)) != wd {
		t.Fatalf("pwd %q", b)
	}
}

func TestCannotStartIsAFailedJob(t *testing.T) {
	s := newService(t, t.TempDir())
	w := newWorkflow("/no/such/binary")
	ext, err := s.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	st := waitDone(t, s, w, ext)
	if st.Success || !strings.Contains(st.Detail, "cannot start") {
		t.Fatalf("%+v", st)
	}
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	s := newService(t, t.TempDir())
	pidFile := filepath.Join(t.TempDir(), "pid")
	w := newWorkflow("sh", "-c", "sleep 30 & echo $! > "+pidFile+"; wait")
	w.ExternalService.TimeoutSeconds = 1
	ext, _ := s.Submit(context.Background(), w, sid)
	st := waitDone(t, s, w, ext)
	if st.Success || st.Detail != "timed out" {
		t.Fatalf("%+v", st)
	}
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %q", b)
	}
	time.Sleep(100 * time.Millisecond)
	if alive(jobRecord{PID: pid}, "") {
		t.Fatalf("grandchild %d survived the timeout", pid)
	}
}

func TestKill(t *testing.T) {
	s := newService(t, t.TempDir())
	w := newWorkflow("sleep", "30")
	ext, _ := s.Submit(context.Background(), w, sid)
	if st, _ := s.Status(context.Background(), w, ext); !st.Running {
		t.Fatalf("%+v", st)
	}
	if err := s.Kill(context.Background(), w, ext); err != nil {
		t.Fatal(err)
	}
	if st := waitDone(t, s, w, ext); st.Success || st.Detail != "killed" {
		t.Fatalf("%+v", st)
	}
	if err := s.Kill(context.Background(), w, ext); err != nil {
		t.Fatalf("kill of a finished job: %v", err)
	}
}

func TestRestartKeepsFinishedRunsAndAdoptsLiveOnes(t *testing.T) {
	dir := t.TempDir()
	first := newService(t, dir)
	w := newWorkflow("sh", "-c", "exit 0")
	done, _ := first.Submit(context.Background(), w, sid)
	waitDone(t, first, w, done)
	long := newWorkflow("sleep", "1")
	live, _ := first.Submit(context.Background(), long, sid)

	second := newService(t, dir) // a restarted server
	if st, err := second.Status(context.Background(), w, done); err != nil || !st.Success {
		t.Fatalf("finished run after restart: %+v %v", st, err)
	}
	st, err := second.Status(context.Background(), long, live)
	if err != nil || !st.Running || !strings.Contains(st.Detail, "before celos restarted") {
		t.Fatalf("live run after restart: %+v %v", st, err)
	}
	// The job ends and its supervisor records it, whichever server runs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := second.Status(context.Background(), long, live); err != nil || st.Running || !st.Success {
		t.Fatalf("%+v %v", st, err)
	}

	// A job of an older celos (no supervisor) whose process ended while
	// no server ran, without an exit record.
	dead := exec.Command("true")
	dead.Run()
	name := sid.Time.Format(slotLayout) + ".42"
	jobDir := filepath.Join(dir, "wc", name)
	os.MkdirAll(jobDir, 0o755)
	if err := writeJSON(jobDir, "job.json", jobRecord{Workflow: "wc", PID: dead.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	st, err = second.Status(context.Background(), w, "wc@"+name)
	if err != nil || st.Running || st.Success || !strings.Contains(st.Detail, "unknown") {
		t.Fatalf("lost run: %+v %v", st, err)
	}
}

func TestRecover(t *testing.T) {
	s := newService(t, t.TempDir())
	w := newWorkflow("true")
	before := time.Now()
	ext, _ := s.Submit(context.Background(), w, sid)
	got, found, err := s.Recover(context.Background(), w, sid, before)
	if err != nil || !found || got != ext {
		t.Fatalf("Recover = %q %v %v, want %q", got, found, err, ext)
	}
	if _, found, _ := s.Recover(context.Background(), w, sid, time.Now().Add(time.Second)); found {
		t.Fatal("found a job older than the intent")
	}
	other := slot.ID{Workflow: "wc", Time: sid.Time.Add(time.Hour)}
	if _, found, _ := s.Recover(context.Background(), w, other, before); found {
		t.Fatal("found another slot's job")
	}
	if _, found, err := s.Recover(context.Background(), w, slot.ID{Workflow: "none", Time: sid.Time}, before); found || err != nil {
		t.Fatalf("unknown workflow: %v %v", found, err)
	}
}

func TestBadExternalIDs(t *testing.T) {
	s := newService(t, t.TempDir())
	w := newWorkflow("true")
	for _, id := range []string{"", "x", "../../etc@passwd", "wc@../../x", "wc@20150913T134000Z.1/../..", "wc@20150913T134000Z.-1", "a/b@20150913T134000Z.1"} {
		if _, err := s.Status(context.Background(), w, id); err == nil {
			t.Errorf("Status(%q) accepted", id)
		}
		if err := s.Kill(context.Background(), w, id); err == nil {
			t.Errorf("Kill(%q) accepted", id)
		}
		if _, err := s.LogPath(id); err == nil {
			t.Errorf("LogPath(%q) accepted", id)
		}
	}
	if _, err := s.Status(context.Background(), w, "wc@20150913T134000Z.7"); err == nil || !strings.Contains(err.Error(), "no job") {
		t.Fatalf("missing job: %v", err)
	}
}

func TestPrune(t *testing.T) {
	s := newService(t, t.TempDir())
	w := newWorkflow("true")
	old, _ := s.Submit(context.Background(), w, sid)
	waitDone(t, s, w, old)
	running, _ := s.Submit(context.Background(), newWorkflow("sleep", "2"), sid)
	cut := time.Now()
	recent, _ := s.Submit(context.Background(), w, sid)
	waitDone(t, s, w, recent)
	n, err := s.Prune(cut)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if _, err := s.Status(context.Background(), w, old); err == nil {
		t.Fatal("old job still there")
	}
	for _, id := range []string{running, recent} {
		if _, err := s.Status(context.Background(), w, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// TestTimerFiringAfterExitIsNoTimeout: a run that ended in time is not
// recorded as timed out because its timer fired while the supervisor was
// between Wait and stopping the timer (runJob is the supervisor's body, run
// in this process to widen that window).
func TestTimerFiringAfterExitIsNoTimeout(t *testing.T) {
	afterWait = func() { time.Sleep(1500 * time.Millisecond) }
	t.Cleanup(func() { afterWait = nil })
	_, jobDir := plantJob(t, t.TempDir(), 1, "true")
	var report bytes.Buffer
	if code, _ := runJob(jobDir, nopCloser{&report}, nil, nil); code != 0 {
		t.Fatalf("runJob = %d", code)
	}
	rec, ok, err := readExit(jobDir)
	if err != nil || !ok || !rec.success() {
		t.Fatalf("a run that exited 0 in time: %+v %v %v (report %q)", rec, ok, err, report.String())
	}
}
