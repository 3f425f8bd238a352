package command

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/external"
)

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// plantJob writes what Submit writes before starting a supervisor (the
// job's directory and job.json) and returns the external ID and directory.
func plantJob(t *testing.T, dir string, timeout int64, argv ...string) (string, string) {
	t.Helper()
	name := sid.Time.Format(slotLayout) + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
	jobDir := filepath.Join(dir, "wc", name)
	if err := os.MkdirAll(jobDir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := jobRecord{Workflow: "wc", Slot: "x", Argv: argv, Started: time.Now().UTC(), Timeout: timeout, Supervised: true}
	if err := writeJSON(jobDir, "job.json", rec); err != nil {
		t.Fatal(err)
	}
	return "wc@" + name, jobDir
}

// gate returns a file path and a release function: commands running
// `flock -s PATH true` wait until release.
func gate(t *testing.T) (string, func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { f.Close() }) }
	t.Cleanup(release)
	return path, release
}

func claimOf(t *testing.T, s *Service, ext string) claimRecord {
	t.Helper()
	dir, err := s.jobDir(ext)
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := readClaim(dir)
	if err != nil || !ok {
		t.Fatalf("claim of %s: %v %v", ext, ok, err)
	}
	return c
}

// TestJobEndsWhileNoServerRuns: a job's supervisor is in a session of its
// own, ignores the signals a terminal or service manager sends to what
// celos started (SIGTERM, SIGINT, SIGHUP), and records how the command
// ended, so a server that did not start the job (a restarted one) reports
// it running and then its real exit status.
func TestJobEndsWhileNoServerRuns(t *testing.T) {
	dir := t.TempDir()
	first := newService(t, dir)
	g, release := gate(t)
	w := newWorkflow("sh", "-c", `flock -s "$G" true; exit 0`)
	w.ExternalService.Env = map[string]string{"G": g}
	ext, err := first.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	c := claimOf(t, first, ext)
	// /proc/<pid>/stat: state, ppid, pgrp, session, ...
	if f := procStatFields(c.PID); len(f) < 4 || f[3] != strconv.Itoa(c.PID) {
		t.Fatalf("supervisor %d: stat fields %v, want a session of its own", c.PID, f)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if err := syscall.Kill(c.PID, sig); err != nil {
			t.Fatal(err)
		}
	}
	second := newService(t, dir) // a restarted server
	time.Sleep(100 * time.Millisecond)
	st, err := second.Status(context.Background(), w, ext)
	if err != nil || !st.Running || !strings.Contains(st.Detail, "before celos restarted") {
		t.Fatalf("job of the old server: %+v %v", st, err)
	}
	release()
	if st := waitDone(t, second, w, ext); !st.Success || st.Detail != "exit 0" {
		t.Fatalf("job that exited 0 while its server was gone: %+v", st)
	}
}

// TestRecoverAbandonsAJobThatNeverStarted: the server stopped between
// writing job.json and its supervisor's claim. Recover abandons the job
// (claim.json "run": false), logs why, and does not return it, so the
// engine submits the slot once more; a supervisor that comes late finds
// the job abandoned and does not start the command. A job whose supervisor
// claimed it first is found instead.
func TestRecoverAbandonsAJobThatNeverStarted(t *testing.T) {
	dir := t.TempDir()
	var log syncBuffer
	s, err := New(dir, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkflow("true")
	since := time.Now()
	marker := filepath.Join(t.TempDir(), "ran")
	ext, jobDir := plantJob(t, dir, 0, "touch", marker)
	got, found, err := s.Recover(context.Background(), w, sid, since)
	if err != nil || found {
		t.Fatalf("Recover = %q %v %v, want not found", got, found, err)
	}
	if !strings.Contains(log.String(), "never started") || !strings.Contains(log.String(), ext) {
		t.Fatalf("no log line names the abandoned job %s:\n%s", ext, log.String())
	}
	var report bytes.Buffer
	if code, _ := runJob(jobDir, nopCloser{&report}, nil, nil); code != 0 || report.String() != "abandoned\n" {
		t.Fatalf("late supervisor: %d %q", code, report.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command of an abandoned job ran")
	}
	st, err := s.Status(context.Background(), w, ext)
	if err != nil || st.Running || st.Success || !st.NeverStarted || !strings.HasPrefix(st.Detail, "never started") {
		t.Fatalf("Status of the abandoned job: %+v %v, want never started (the engine submits the slot again)", st, err)
	}
	if got, found, err := s.Recover(context.Background(), w, sid, since); err != nil || found {
		t.Fatalf("second Recover = %q %v %v, want not found", got, found, err)
	}

	// Killed before it started: abandoned too, but the operator's kill
	// fails the slot (not submitted again).
	ext3, jobDir3 := plantJob(t, dir, 0, "touch", marker)
	if err := s.Kill(context.Background(), w, ext3); err != nil {
		t.Fatal(err)
	}
	if code, _ := runJob(jobDir3, nopCloser{&report}, nil, nil); code != 0 {
		t.Fatalf("late supervisor of a killed job: %d", code)
	}
	if st, err := s.Status(context.Background(), w, ext3); err != nil || st.Running || st.Success || st.NeverStarted || st.Detail != "never started: killed before it started" {
		t.Fatalf("Status of a job killed before it started: %+v %v, want a failure (not NeverStarted)", st, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command of a job killed before it started ran")
	}

	// The supervisor claimed it first: it ran, Recover finds it.
	ext2, jobDir2 := plantJob(t, dir, 0, "touch", marker)
	report.Reset()
	if code, _ := runJob(jobDir2, nopCloser{&report}, nil, nil); code != 0 || !strings.HasPrefix(report.String(), "started ") {
		t.Fatalf("supervisor: %d %q", code, report.String())
	}
	got, found, err = s.Recover(context.Background(), w, sid, since)
	if err != nil || !found || got != ext2 {
		t.Fatalf("Recover = %q %v %v, want %q", got, found, err, ext2)
	}
	if st, err := s.Status(context.Background(), w, ext2); err != nil || !st.Success {
		t.Fatalf("Status of the run: %+v %v", st, err)
	}
}

// TestSupervisorKilledIsExitStatusUnknown: only a job whose supervisor
// died (kill -9 of it, a machine restart) ends as "exit status unknown";
// what it left running is killed so a retry does not overlap with it.
func TestSupervisorKilledIsExitStatusUnknown(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	pidFile := filepath.Join(t.TempDir(), "pid")
	w := newWorkflow("sh", "-c", `echo $$ > "$P"; exec sleep 30`)
	w.ExternalService.Env = map[string]string{"P": pidFile}
	ext, err := s.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	c := claimOf(t, s, ext)
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(c.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitDone(t, s, w, ext)
	if st.Success || !strings.Contains(st.Detail, "exit status unknown") || !strings.Contains(st.Detail, "left behind were killed") {
		t.Fatalf("%+v", st)
	}
	waitGone(t, pid)
}

// TestKillAfterRestart: a restarted server kills a job through its
// supervisor, which records it killed; the command's whole group is gone.
func TestKillAfterRestart(t *testing.T) {
	dir := t.TempDir()
	first := newService(t, dir)
	pidFile := filepath.Join(t.TempDir(), "pid")
	w := newWorkflow("sh", "-c", `sleep 30 & echo $! > "$P"; wait`)
	w.ExternalService.Env = map[string]string{"P": pidFile}
	ext, err := first.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	second := newService(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := second.Kill(ctx, w, ext); err != nil {
		t.Fatal(err)
	}
	st, err := second.Status(context.Background(), w, ext)
	if err != nil || st.Running || st.Detail != "killed" {
		t.Fatalf("after Kill: %+v %v, want detail \"killed\"", st, err)
	}
	waitGone(t, child)
}

// TestSubmitTimeoutAbandonsOrFindsTheJob: a Submit whose caller gives up
// before the supervisor reports (here: a context already past its
// deadline) returns an error wrapping external.ErrUnavailable, and the
// job either never runs (abandoned: Recover does not find it and the slot
// is submitted again) or runs and Recover finds it; never a job that runs
// unseen.
func TestSubmitTimeoutAbandonsOrFindsTheJob(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	marker := filepath.Join(t.TempDir(), "ran")
	w := newWorkflow("touch", marker)
	since := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	ext, err := s.Submit(ctx, w, sid)
	if !errors.Is(err, external.ErrUnavailable) {
		t.Fatalf("Submit past its deadline = %q, %v; want an ErrUnavailable", ext, err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := s.Wait(wctx); err != nil { // the supervisor has exited
		t.Fatal(err)
	}
	got, found, rerr := s.Recover(context.Background(), w, sid, since)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var ran bool
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, serr := os.Stat(marker)
		ran = serr == nil
		if ran == found || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ran != found {
		t.Fatalf("the command ran: %v; Recover found a job: %v (%q); Submit said %v", ran, found, got, err)
	}
	t.Logf("ran=%v (Submit: %v)", ran, err)
}
