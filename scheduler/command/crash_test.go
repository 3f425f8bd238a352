package command

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/schema/workflow"
)

// TestCrashWhileStarting: a job recorded by an older celos (no supervisor)
// whose server was killed between writing job.json and
// recording the PID (job.json is written before the process starts, so
// any process that started has one). Recover finds the job, so the slot is
// not started twice; while the process lives (found by CELOS_EXTERNAL_ID
// in its environment) it is running and can be killed; a job.json without
// a PID and without a process is "exit status unknown", never running.
func TestCrashWhileStarting(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	w := newWorkflow("sleep", "30")
	since := time.Now()
	name := sid.Time.Format(slotLayout) + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
	ext := "wc@" + name
	jobDir := filepath.Join(dir, "wc", name)
	if err := os.MkdirAll(jobDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(jobDir, "job.json", jobRecord{Workflow: "wc", Slot: "x", Argv: []string{"sleep", "30"}}); err != nil {
		t.Fatal(err)
	}
	got, found, err := s.Recover(context.Background(), w, sid, since)
	if err != nil || !found || got != ext {
		t.Fatalf("Recover = %q %v %v, want %q", got, found, err, ext)
	}
	// No process: not running, exit unknown.
	st, err := s.Status(context.Background(), w, ext)
	if err != nil || st.Running || st.Success || !strings.Contains(st.Detail, "may or may not have run") {
		t.Fatalf("job.json without a PID or process: %+v %v", st, err)
	}

	// The process started before the crash (its PID never recorded).
	p := exec.Command("sleep", "30")
	p.Env = append(os.Environ(), "CELOS_EXTERNAL_ID="+ext)
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	t.Cleanup(func() { p.Process.Kill(); <-done })
	st, err = s.Status(context.Background(), w, ext)
	if err != nil || !st.Running {
		t.Fatalf("a live process without a recorded PID: %+v %v", st, err)
	}
	if err := s.Kill(context.Background(), w, ext); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill did not reach the process found by its environment")
	}
	st, err = s.Status(context.Background(), w, ext)
	if err != nil || st.Running || st.Detail != "killed" {
		t.Fatalf("after the kill: %+v %v", st, err)
	}
}

// TestSubmitWritesJobBeforeStart checks the order: job.json and the
// supervisor's claim exist before the command runs (the command sees them).
func TestSubmitWritesJobBeforeStart(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	w := newWorkflow("sh", "-c", `d="$JOBS/wc/${CELOS_EXTERNAL_ID#wc@}"; test -f "$d/job.json" && test -f "$d/claim.json"`)
	w.ExternalService.Env = map[string]string{"JOBS": dir}
	ext, err := s.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	if st := waitDone(t, s, w, ext); !st.Success {
		t.Fatalf("job.json or claim.json did not exist when the command started: %+v", st)
	}
	c, ok, err := readClaim(filepath.Join(dir, "wc", strings.TrimPrefix(ext, "wc@")))
	if err != nil || !ok || !c.Run || c.PID <= 0 {
		t.Fatalf("claim.json after the start: %+v %v %v", c, ok, err)
	}
}

// TestTimeoutEnforcedAfterRestart: a job adopted by a restarted server (its
// supervisor, and so its timer, died with the old server) is still killed,
// with its whole process group, once its timeout has passed.
func TestTimeoutEnforcedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	w := newWorkflow("sleep", "30")
	w.ExternalService.TimeoutSeconds = 1
	name := sid.Time.Format(slotLayout) + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
	ext := "wc@" + name
	jobDir := filepath.Join(dir, "wc", name)
	if err := os.MkdirAll(jobDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The process the old server started (and no longer supervises).
	p := exec.Command("sleep", "30")
	p.Env = append(os.Environ(), "CELOS_EXTERNAL_ID="+ext)
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	t.Cleanup(func() { p.Process.Kill(); <-done })
	rec := jobRecord{Workflow: "wc", Slot: "x", Argv: []string{"sleep", "30"}, PID: p.Process.Pid,
		Boot: procStartTime(p.Process.Pid), Started: time.Now().Add(-time.Minute).UTC(), Timeout: 1}
	if err := writeJSON(jobDir, "job.json", rec); err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(context.Background(), w, ext)
	if err != nil || st.Running || st.Success || st.Detail != "timed out" {
		t.Fatalf("adopted job past its timeout: %+v %v", st, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("adopted job past its timeout was not killed")
	}
}

// TestKillAfterRestartReachesOrphanedChildren: the job's process ended
// while celos was down but its children (same CELOS_EXTERNAL_ID, same
// process group) still run; Kill stops them.
func TestKillAfterRestartReachesOrphanedChildren(t *testing.T) {
	s, w, ext, child := orphanedJob(t)
	if err := s.Kill(context.Background(), w, ext); err != nil {
		t.Fatal(err)
	}
	waitGone(t, child)
}

// TestExitRecordWriteFailureIsNotALostRun: while exit.json cannot be
// written, the job's supervisor keeps trying and the job is reported
// running (not lost, not "exit status unknown"); once it can, the record is
// written and the run's real status reported. (A server knows nothing the
// supervisor has not recorded: it reports the job running, or the service
// unavailable while the record is unreadable.)
func TestExitRecordWriteFailureIsNotALostRun(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	// The command makes exit.json's path a non-empty directory: the
	// rename onto it fails.
	w := newWorkflow("sh", "-c", `mkdir -p "$JOBS/wc/${CELOS_EXTERNAL_ID#wc@}/exit.json/x"`)
	w.ExternalService.Env = map[string]string{"JOBS": dir}
	ext, err := s.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	jobDir := filepath.Join(dir, "wc", strings.TrimPrefix(ext, "wc@"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		log, _ := s.ReadLog(ext, 0)
		if strings.Contains(string(log), "cannot record how the job ended") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor did not report the failed write: %q", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Running, or the service unavailable (exit.json is unreadable): the
	// engine leaves the slot RUNNING either way; never a verdict.
	for _, server := range []*Service{s, newService(t, dir)} { // and after a restart
		if st, err := server.Status(context.Background(), w, ext); !(err == nil && st.Running) && !errors.Is(err, external.ErrUnavailable) {
			t.Fatalf("run that exited 0, exit.json not writable yet: %+v %v", st, err)
		}
	}
	// Writable again: the supervisor records it.
	if err := os.RemoveAll(filepath.Join(jobDir, "exit.json")); err != nil {
		t.Fatal(err)
	}
	if st := waitDone(t, newService(t, dir), w, ext); !st.Success {
		t.Fatalf("%+v", st)
	}
	if rec, ok, err := readExit(jobDir); err != nil || !ok || !rec.success() {
		t.Fatalf("exit.json after the retry: %+v %v %v", rec, ok, err)
	}
}

// TestStatusAfterRestartStopsOrphanedChildren: the job's process ended
// while celos was down, leaving a child (same CELOS_EXTERNAL_ID) running;
// Status reports the job failed (exit status unknown) and stops the child,
// so that a retry does not overlap with it.
func TestStatusAfterRestartStopsOrphanedChildren(t *testing.T) {
	s, w, ext, child := orphanedJob(t)
	st, err := s.Status(context.Background(), w, ext)
	if err != nil || st.Running || st.Success || !strings.Contains(st.Detail, "left behind were killed") {
		t.Fatalf("Status = %+v, %v; want a failure that names the killed leftovers", st, err)
	}
	waitGone(t, child)
}

// TestPruneAbandonedJobs: a job that ended while celos was down has no
// exit record and never will; Prune removes it like an ended one once it
// is old enough, but keeps an old job whose process still runs.
func TestPruneAbandonedJobs(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	w := newWorkflow("true")
	plant := func(pid int, env bool) (string, *exec.Cmd) {
		name := sid.Time.Format(slotLayout) + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
		ext := "wc@" + name
		jobDir := filepath.Join(dir, "wc", name)
		if err := os.MkdirAll(jobDir, 0o755); err != nil {
			t.Fatal(err)
		}
		var cmd *exec.Cmd
		if env {
			cmd = exec.Command("sleep", "30")
			cmd.Env = append(os.Environ(), "CELOS_EXTERNAL_ID="+ext)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			pid = cmd.Process.Pid
		}
		if err := writeJSON(jobDir, "job.json", jobRecord{Workflow: "wc", Slot: "x", Argv: []string{"true"}, PID: pid, Started: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
		return ext, cmd
	}
	// A PID that cannot be alive: a process that has exited and been reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead, _ := plant(gone.Process.Pid, false)
	live, _ := plant(0, true)
	n, err := s.Prune(time.Now().Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the abandoned job pruned", n, err)
	}
	if _, err := s.Status(context.Background(), w, dead); err == nil {
		t.Fatal("the abandoned job is still there")
	}
	if st, err := s.Status(context.Background(), w, live); err != nil || !st.Running {
		t.Fatalf("the live old job: %+v, %v", st, err)
	}
}

// orphanedJob plants what a server killed while a job ran leaves behind:
// the job's record, its leader process ended, and the child it started
// still running with the job's CELOS_EXTERNAL_ID. It returns a fresh
// Service on that directory, the workflow, the external ID and the child.
func orphanedJob(t *testing.T) (*Service, *workflow.Workflow, string, int) {
	t.Helper()
	dir := t.TempDir()
	s := newService(t, dir)
	w := newWorkflow("sh", "-c", "sleep 30 & echo $!")
	name := sid.Time.Format(slotLayout) + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
	ext := "wc@" + name
	jobDir := filepath.Join(dir, "wc", name)
	if err := os.MkdirAll(jobDir, 0o755); err != nil {
		t.Fatal(err)
	}
	leader := exec.Command("sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!")
	leader.Env = append(os.Environ(), "CELOS_EXTERNAL_ID="+ext)
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := leader.Output()
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("child pid %q", out)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if err := writeJSON(jobDir, "job.json", jobRecord{Workflow: "wc", Slot: "x", Argv: w.ExternalService.Command, PID: leader.Process.Pid, Started: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	return s, w, ext, child
}

// waitGone waits until process pid has ended, failing the test after 10 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(jobRecord{PID: pid}, "") {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
