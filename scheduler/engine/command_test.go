package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// TestEndToEndWithCommandService runs the engine with the real state
// database (fsync on), the real command service and file: hdfsCheck
// triggers: a slot waits for its input, runs, fails once, is retried and
// succeeds; a downstream workflow with a success trigger follows.
func TestEndToEndWithCommandService(t *testing.T) {
	wdir, ddir, jobs, input := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	marker := filepath.Join(t.TempDir(), "attempted")
	up := fixture.Hourly("up")
	up.StartTime = ts("2024-01-01T00:00Z")
	up.MaxRetryCount = 1
	up.Trigger = workflow.Trigger{Type: workflow.TriggerHDFSCheck, FS: "file:///", Path: input + "/${year}-${month}-${day}/${hour}/_READY"}
	// Fails the first time, succeeds the second.
	up.ExternalService.Command = []string{"sh", "-c", `if [ -e "$M" ]; then echo second; else touch "$M"; echo first; exit 1; fi`}
	up.ExternalService.Env = map[string]string{"M": marker}
	down := fixture.Hourly("down")
	down.StartTime = up.StartTime
	down.Schedule = workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: "up"}
	down.Trigger = workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: "up"}
	down.ExternalService.Command = []string{"echo", "down ${hour}"}
	fixture.WriteProject(t, wdir, "p", up, down)

	db, err := statedb.Open(ddir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc, err := command.New(jobs, command.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := ts("2024-01-01T00:30Z")
	s0 := slot.ID{Workflow: "up", Time: ts("2024-01-01T00:00Z")}
	d0 := slot.ID{Workflow: "down", Time: s0.Time}
	get := func(id slot.ID) slot.State {
		st, found, err := db.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return slot.NewWaiting(id)
		}
		return st
	}
	step := func() {
		t.Helper()
		if err := e.Step(ctx, now, nil); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		svc.Wait(wctx)
	}

	step()
	if st := get(s0); st.Status != slot.Waiting {
		t.Fatalf("no input yet: %+v", st)
	}
	ts, _ := e.TriggerStatus(ctx, s0, now)
	if ts.Ready || !strings.Contains(ts.Description, "/2024-01-01/00/_READY is not ready") {
		t.Fatalf("trigger status %+v", ts)
	}
	os.MkdirAll(filepath.Join(input, "2024-01-01", "00"), 0o755)
	os.WriteFile(filepath.Join(input, "2024-01-01", "00", "_READY"), nil, 0o644)

	var trace []string
	for range 12 {
		step()
		trace = append(trace, string(get(s0).Status)+"/"+string(get(d0).Status))
		if get(d0).Status == slot.Success {
			break
		}
	}
	want := "READY/WAITING RUNNING/WAITING WAITING/WAITING READY/WAITING RUNNING/WAITING SUCCESS/WAITING SUCCESS/READY SUCCESS/RUNNING SUCCESS/SUCCESS"
	if got := strings.Join(trace, " "); got != want {
		t.Fatalf("trace\n got %s\nwant %s", got, want)
	}
	st := get(s0)
	if st.RetryCount != 1 {
		t.Fatalf("%+v", st)
	}
	out, err := svc.ReadLog(st.ExternalID, 0)
	if err != nil || string(out) != "second\n" {
		t.Fatalf("log %q %v", out, err)
	}
	out, _ = svc.ReadLog(get(d0).ExternalID, 0)
	if string(out) != "down 00\n" {
		t.Fatalf("down log %q", out)
	}
}

// TestUnreadableIntentRecoversOnlyItsOwnJob: a READY slot whose submit
// intent cannot be read after a restart (torn by a power loss, garbage)
// is looked up on the service for a job started at or after the intent
// was written (the file's modification time), never for any job the slot
// ever had: the job of its previous run must not be taken for the
// rerun's, which would make the slot SUCCESS without running it. Real
// state database and command service.
func TestUnreadableIntentRecoversOnlyItsOwnJob(t *testing.T) {
	wdir, ddir, jobs := t.TempDir(), t.TempDir(), t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.ExternalService.Command = []string{"sh", "-c", `echo run >> "$R"`}
	w.ExternalService.Env = map[string]string{"R": runs}
	fixture.WriteProject(t, wdir, "p", w)
	svc, err := command.New(jobs, command.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := ts("2024-01-01T00:30Z")
	s0 := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	var db *statedb.DB
	var e *Engine
	open := func() {
		t.Helper()
		if db, err = statedb.Open(ddir); err != nil {
			t.Fatal(err)
		}
		if e, err = New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard}); err != nil {
			t.Fatal(err)
		}
	}
	open()
	defer func() { db.Close() }()
	status := func() slot.Status {
		st, found, err := db.Get(s0)
		if err != nil || !found {
			t.Fatalf("slot: %v %v", found, err)
		}
		return st.Status
	}
	stepUntil := func(want slot.Status) {
		t.Helper()
		for range 10 {
			if err := e.Step(ctx, now, nil); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			svc.Wait(wctx)
			cancel()
			if status() == want {
				return
			}
		}
		t.Fatalf("slot is %s, want %s", status(), want)
	}
	stepUntil(slot.Success) // the first run
	if err := e.Rerun(ctx, s0, now); err != nil {
		t.Fatal(err)
	}
	stepUntil(slot.Ready)
	// The server stops here, its intent for the rerun torn: garbage.
	db.Close()
	p := filepath.Join(ddir, "intent", "wf", "2024-01-01", "00:00:00.000Z")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte{0, 0, 0, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	open()
	stepUntil(slot.Success)
	data, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "run\n"); n != 2 {
		t.Fatalf("the command ran %d times, want 2 (the first run and the rerun)", n)
	}
}

// TestKillInterruptedBeforeItsStateIsNotRetried: an operator's kill
// whose job was killed but whose KILLED state was not written (the server
// stopped in between; here the service's Kill is called alone, as Kill's
// first half) leaves a RUNNING slot whose job ended killed. The next
// step makes it KILLED, as the kill would have: not a failure to retry,
// which would run the slot again although the operator killed it. Real
// state database and command service.
func TestKillInterruptedBeforeItsStateIsNotRetried(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	s := startSleepingSlot(t, func(w *workflow.Workflow) {
		w.MaxRetryCount = 2
		w.ExternalService.Command = []string{"sh", "-c", `echo run >> "$R"; sleep 60`}
		w.ExternalService.Env = map[string]string{"R": runs}
	})
	ctx, e, svc, now := context.Background(), s.e, s.svc, s.now
	get := func() slot.State {
		st, found, err := s.db.Get(s.id)
		if err != nil || !found {
			t.Fatalf("slot: %v %v", found, err)
		}
		return st
	}
	st := get()
	// RUNNING says the command was started, not that the shell has run
	// its first line yet: kill it once it ran.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(runs); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the command did not start within 60 s: %v", err)
		}
	}
	if err := svc.Kill(ctx, &s.w, st.ExternalID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.Step(ctx, now, nil); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		svc.Wait(wctx)
		cancel()
	}
	if got := get(); got.Status != slot.Killed || got.ExternalID != st.ExternalID || got.RetryCount != 0 {
		t.Errorf("slot %+v after its job was killed, want KILLED with the job's ID and no retry", got)
	}
	data, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "run\n"); n != 1 {
		t.Errorf("the command ran %d times, want 1", n)
	}
}

// TestKillOfAnUnreadableSlotKillsItsJob: a kill of a slot whose state
// file cannot be read (the API suggests it: "a rerun or kill rewrites
// it") kills the job the service has for the slot, whose ID the lost
// record held, before it records KILLED: a job left running would run on
// beside the rerun that usually follows. Real state database and command
// service.
func TestKillOfAnUnreadableSlotKillsItsJob(t *testing.T) {
	s := startSleepingSlot(t)
	ctx := context.Background()
	// The state file is torn; the server restarts.
	s.db.Close()
	if err := os.WriteFile(s.stateFile(), []byte(`{"sta`), 0o644); err != nil {
		t.Fatal(err)
	}
	s.open(t)
	if err := s.e.Kill(ctx, s.id); err != nil {
		t.Fatal(err)
	}
	if st, _, err := s.db.Get(s.id); err != nil || st.Status != slot.Killed || st.ExternalID != s.ext {
		t.Errorf("slot %+v (%v), want KILLED with the job's ID %s", st, err, s.ext)
	}
	js, err := s.svc.Status(ctx, &s.w, s.ext)
	if err != nil {
		t.Fatal(err)
	}
	if js.Running {
		t.Fatalf("the slot's job runs on after the kill: %+v", js)
	}
}

// TestRerunOfAnUnreadableSlotWhoseJobRuns: a rerun of a slot whose state
// file cannot be read is refused while the service has a running job of
// the slot (the lost record's, which would run on beside the rerun), as a
// rerun of a RUNNING slot is; once that job is killed, the rerun is
// accepted. Real state database and command service.
func TestRerunOfAnUnreadableSlotWhoseJobRuns(t *testing.T) {
	s := startSleepingSlot(t)
	ctx := context.Background()
	if err := os.WriteFile(s.stateFile(), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Reload(); err != nil {
		t.Fatal(err)
	}
	err := s.e.Rerun(ctx, s.id, s.now)
	if !errors.Is(err, scheduler.ErrNotFinal) || !strings.Contains(err.Error(), s.ext) {
		t.Fatalf("rerun of an unreadable slot whose job %s runs: %v, want ErrNotFinal naming the job", s.ext, err)
	}
	if _, err := s.e.CheckRerun(ctx, s.id, s.now); !errors.Is(err, scheduler.ErrNotFinal) {
		t.Errorf("GET /rerun's check: %v, want ErrNotFinal", err)
	}
	if err := s.e.Kill(ctx, s.id); err != nil {
		t.Fatal(err)
	}
	if err := s.e.Rerun(ctx, s.id, s.now); err != nil {
		t.Fatalf("rerun after the kill: %v", err)
	}
}

// sleepingSlot is an engine on a real state database and command service
// whose hourly workflow wf's first slot (2024-01-01T00:00Z) runs `sleep
// 60` (or what edit makes of the workflow) as job ext, at now (00:30Z);
// the job is killed and the database closed when the test ends.
type sleepingSlot struct {
	w          workflow.Workflow
	svc        *command.Service
	wdir, ddir string
	db         *statedb.DB
	e          *Engine
	id         slot.ID
	now        time.Time
	ext        string
}

func startSleepingSlot(t *testing.T, edit ...func(*workflow.Workflow)) *sleepingSlot {
	t.Helper()
	s := &sleepingSlot{wdir: t.TempDir(), ddir: t.TempDir(), now: ts("2024-01-01T00:30Z"),
		id: slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}}
	s.w = fixture.Hourly("wf")
	s.w.StartTime = s.id.Time
	s.w.ExternalService.Command = []string{"sleep", "60"}
	for _, f := range edit {
		f(&s.w)
	}
	fixture.WriteProject(t, s.wdir, "p", s.w)
	var err error
	if s.svc, err = command.New(t.TempDir(), command.Options{Logger: discard}); err != nil {
		t.Fatal(err)
	}
	s.open(t)
	t.Cleanup(func() { s.db.Close() })
	for range 5 {
		if err := s.e.Step(context.Background(), s.now, nil); err != nil {
			t.Fatal(err)
		}
		if st, _, _ := s.db.Get(s.id); st.Status == slot.Running {
			s.ext = st.ExternalID
			break
		}
	}
	if s.ext == "" {
		t.Fatal("the slot did not start")
	}
	t.Cleanup(func() { s.svc.Kill(context.Background(), &s.w, s.ext) })
	return s
}

// open opens the state database and an engine on it (again after a
// restart).
func (s *sleepingSlot) open(t *testing.T) {
	t.Helper()
	var err error
	if s.db, err = statedb.Open(s.ddir); err != nil {
		t.Fatal(err)
	}
	if s.e, err = New(Options{WorkflowsDir: s.wdir, Store: s.db, Services: map[string]external.Service{workflow.ServiceCommand: s.svc}, Logger: discard}); err != nil {
		t.Fatal(err)
	}
}

// stateFile is the path of the slot's state file.
func (s *sleepingSlot) stateFile() string {
	return filepath.Join(s.ddir, "state", "wf", "2024-01-01", "00:00:00.000Z")
}

// TestRerunOverADirectory: a rerun (or kill) of a slot whose state file
// is a directory that holds something is refused as an unreadable slot
// (the API's 409 slot_unreadable), saying to remove it; it was an
// unexplained failure (a 500). Once the directory is empty, the rerun
// replaces it. Real state database and command service.
func TestRerunOverADirectory(t *testing.T) {
	s := startSleepingSlot(t)
	ctx := context.Background()
	if err := s.e.Kill(ctx, s.id); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.stateFile()); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(s.stateFile(), "notes")
	if err := os.MkdirAll(s.stateFile(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Reload(); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"rerun": func() error { return s.e.Rerun(ctx, s.id, s.now) },
		"kill":  func() error { return s.e.Kill(ctx, s.id) },
	} {
		if err := op(); !errors.Is(err, scheduler.ErrSlotUnreadable) || !strings.Contains(err.Error(), s.stateFile()) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("%s of a slot whose state file is a directory that holds a file: %v, want ErrSlotUnreadable naming it and saying to remove it", name, err)
		}
	}
	if err := os.Remove(inside); err != nil {
		t.Fatal(err)
	}
	if err := s.e.Rerun(ctx, s.id, s.now); err != nil {
		t.Fatalf("rerun once the directory is empty: %v", err)
	}
	if st, _, err := s.db.Get(s.id); err != nil || st.Status != slot.Waiting {
		t.Errorf("slot %+v (%v) after the rerun, want WAITING", st, err)
	}
}
