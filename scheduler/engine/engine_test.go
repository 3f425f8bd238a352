package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestEngineLifecycleWithRealDB(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.MaxRetryCount = 1
	r := newRig(t, nil, w)
	now := ts("2024-01-01T02:30Z")
	s0, s1 := ts("2024-01-01T00:00Z"), ts("2024-01-01T01:00Z")

	// Step 1: both slots WAITING → READY (always trigger).
	rep := r.step(now)
	if got := r.state("wf", s0).Status; got != slot.Ready {
		t.Fatalf("after step 1: %s is %s, want READY", s0, got)
	}
	if rep.Transitions[slot.Ready] != 3 { // 00:00, 01:00, 02:00
		t.Fatalf("transitions %v", rep.Transitions)
	}
	// Step 2: oldest READY submitted (concurrency 1).
	r.step(now)
	if st := r.state("wf", s0); st.Status != slot.Running || st.ExternalID == "" {
		t.Fatalf("after step 2: %+v", st)
	}
	if st := r.state("wf", s1); st.Status != slot.Ready {
		t.Fatalf("after step 2: second slot %+v", st)
	}
	// Job fails → retry (WAITING, retry 1).
	r.svc.finish(slot.ID{Workflow: "wf", Time: s0}, false)
	r.step(now)
	if st := r.state("wf", s0); st.Status != slot.Waiting || st.RetryCount != 1 || st.ExternalID != "" {
		t.Fatalf("after failure: %+v", st)
	}
	// Capacity freed: next step submits the 01:00 slot and readies 00:00 again.
	r.step(now)
	if st := r.state("wf", s1); st.Status != slot.Running {
		t.Fatalf("01:00: %+v", st)
	}
	if st := r.state("wf", s0); st.Status != slot.Ready || st.RetryCount != 1 {
		t.Fatalf("00:00: %+v", st)
	}
	r.svc.finish(slot.ID{Workflow: "wf", Time: s1}, true)
	r.step(now) // 01:00 SUCCESS
	r.step(now) // 00:00 RUNNING again
	if st := r.state("wf", s1); st.Status != slot.Success {
		t.Fatalf("01:00: %+v", st)
	}
	if st := r.state("wf", s0); st.Status != slot.Running || st.RetryCount != 1 {
		t.Fatalf("00:00: %+v", st)
	}
	r.svc.finish(slot.ID{Workflow: "wf", Time: s0}, false)
	r.step(now)
	if st := r.state("wf", s0); st.Status != slot.Failure || st.RetryCount != 1 || st.ExternalID == "" {
		t.Fatalf("00:00 after last failure: %+v", st)
	}

	// The state files are Celos's layout and format.
	data, err := os.ReadFile(filepath.Join(r.ddir, "state", "wf", "2024-01-01", "01:00:00.000Z"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"time":"2024-01-01T01:00:00.000Z","status":"SUCCESS","externalID":"job-2","retryCount":0}`; string(data) != want {
		t.Fatalf("state file:\n got %s\nwant %s", data, want)
	}

	// Slots: newest first, WAITING synthesized for 02:00 if it has no record.
	got, err := r.e.Slots(context.Background(), "wf", ts("2024-01-01T00:00Z"), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].ID.Time.Equal(ts("2024-01-01T02:00Z")) || got[2].Status != slot.Failure {
		t.Fatalf("Slots: %+v", got)
	}

	// A steady state writes nothing.
	for range 3 {
		r.svc.finishAll(true)
		r.step(now)
	}
	if rep := r.step(now); rep.Writes != 0 {
		t.Fatalf("steady-state step wrote %d files: %+v", rep.Writes, rep)
	}
}

func TestRerunKillPause(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.SchedulingStrategy.Concurrency = 5
	r := newRig(t, nil, w)
	ctx := context.Background()
	now := ts("2024-01-01T01:30Z")
	s0 := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}

	if err := r.e.Rerun(ctx, s0, now); err != nil { // no record: allowed (Celos PR #596)
		t.Fatal(err)
	}
	r.step(now)
	r.step(now)
	r.svc.finishAll(true)
	r.step(now)
	if st := r.state("wf", s0.Time); st.Status != slot.Success {
		t.Fatalf("%+v", st)
	}
	// Kill of a final slot: illegal.
	if err := r.e.Kill(ctx, s0); !errors.Is(err, slot.ErrIllegalTransition) {
		t.Fatalf("kill SUCCESS: %v", err)
	}
	// Rerun of a final slot: WAITING, retry 0, marked.
	if err := r.e.Rerun(ctx, s0, now); err != nil {
		t.Fatal(err)
	}
	if st := r.state("wf", s0.Time); st.Status != slot.Waiting || st.ExternalID != "" {
		t.Fatalf("after rerun %+v", st)
	}
	if err := r.e.Rerun(ctx, s0, now); !errors.Is(err, slot.ErrIllegalTransition) {
		t.Fatalf("rerun of WAITING: %v", err)
	}
	r.step(now)
	r.step(now)
	st := r.state("wf", s0.Time)
	if st.Status != slot.Running {
		t.Fatalf("rerun slot not resubmitted: %+v", st)
	}
	// Kill while running: the service is asked first.
	r.svc.killErr = errors.New("oozie says no")
	if err := r.e.Kill(ctx, s0); err == nil || r.state("wf", s0.Time).Status != slot.Running {
		t.Fatalf("kill with service error: %v, %+v", err, r.state("wf", s0.Time))
	}
	r.svc.killErr = nil
	if err := r.e.Kill(ctx, s0); err != nil {
		t.Fatal(err)
	}
	if got := r.state("wf", s0.Time); got.Status != slot.Killed || got.ExternalID != st.ExternalID || len(r.svc.kills) != 1 {
		t.Fatalf("after kill %+v kills %v", got, r.svc.kills)
	}
	// Kill of a slot without a record.
	s1 := slot.ID{Workflow: "wf", Time: ts("2024-01-01T02:00Z")}
	if err := r.e.Kill(ctx, s1); err != nil {
		t.Fatal(err)
	}
	// Bad ids and times.
	if err := r.e.Kill(ctx, slot.ID{Workflow: "nope", Time: s1.Time}); !errors.Is(err, slot.ErrUnknownWorkflow) {
		t.Fatalf("unknown workflow: %v", err)
	}
	if err := r.e.Rerun(ctx, slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:30Z")}, now); !errors.Is(err, slot.ErrNotInSchedule) {
		t.Fatalf("not in schedule: %v", err)
	}
	// Pause: the step skips the workflow entirely.
	if err := r.e.SetPaused(ctx, "wf", true); err != nil {
		t.Fatal(err)
	}
	if p, _ := r.e.Paused("wf"); !p {
		t.Fatal("not paused")
	}
	n := len(r.svc.submitted())
	later := ts("2024-01-01T05:30Z")
	r.step(later)
	r.step(later)
	if len(r.svc.submitted()) != n || r.state("wf", ts("2024-01-01T03:00Z")).Status != slot.Waiting {
		t.Fatal("paused workflow was stepped")
	}
	if err := r.e.SetPaused(ctx, "wf", false); err != nil {
		t.Fatal(err)
	}
	r.step(later)
	if r.state("wf", ts("2024-01-01T03:00Z")).Status != slot.Ready {
		t.Fatal("unpaused workflow not stepped")
	}
}

func TestServiceErrorsLeaveSlotsAsTheyWere(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.SchedulingStrategy.Concurrency = 2
	r := newRig(t, nil, w, fixture.Hourly("other"))
	now := ts("2024-01-01T02:30Z")
	r.step(now)
	r.svc.submitErr = errors.Join(external.ErrUnavailable, errors.New("connection refused"))
	rep := r.step(now)
	if rep.Errors["submit"] == 0 {
		t.Fatalf("no submit errors reported: %+v", rep)
	}
	for _, h := range []string{"00:00", "01:00"} {
		if st := r.state("wf", ts("2024-01-01T"+h+"Z")); st.Status != slot.Ready {
			t.Fatalf("%s: %+v", h, st)
		}
	}
	if len(r.e.Problems("wf")) == 0 {
		t.Fatal("no problem recorded")
	}
	st, err := r.e.TriggerStatus(context.Background(), slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}, now)
	if err != nil || !strings.Contains(st.Error, "connection refused") {
		t.Fatalf("trigger status does not show the submit error: %+v %v", st, err)
	}
	r.svc.submitErr = nil
	r.step(now)
	if st := r.state("wf", ts("2024-01-01T00:00Z")); st.Status != slot.Running {
		t.Fatalf("%+v", st)
	}
	r.svc.statusErr = external.ErrUnavailable
	r.svc.finishAll(false)
	r.step(now)
	if st := r.state("wf", ts("2024-01-01T00:00Z")); st.Status != slot.Running {
		t.Fatalf("status error changed the slot: %+v", st)
	}
	r.svc.statusErr = nil
	r.step(now)
	if st := r.state("wf", ts("2024-01-01T00:00Z")); st.Status != slot.Failure {
		t.Fatalf("%+v", st)
	}
}

func TestRunningOutsideWindowIsPolled(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	r := newRig(t, nil, w)
	now := ts("2024-01-01T00:30Z")
	r.step(now)
	r.step(now)
	s0 := ts("2024-01-01T00:00Z")
	if r.state("wf", s0).Status != slot.Running {
		t.Fatal("not running")
	}
	later := now.Add(10 * 24 * time.Hour)
	r.step(later)
	if r.state("wf", s0).Status != slot.Running {
		t.Fatal("changed")
	}
	r.svc.finishAll(true)
	r.step(later)
	if st := r.state("wf", s0); st.Status != slot.Success {
		t.Fatalf("RUNNING slot outside the window was not polled: %+v", st)
	}
}

func TestSubmitIntentRecovery(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	now := ts("2024-01-01T00:30Z")
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}

	for _, withRecover := range []bool{true, false} {
		t.Run(map[bool]string{true: "recoverer", false: "plain"}[withRecover], func(t *testing.T) {
			f := newFake()
			var svc external.Service = f
			if withRecover {
				svc = recoverer{f}
			}
			r := newRig(t, svc, w)
			r.step(now) // READY
			// Simulate a crash after the service accepted the job: the job
			// exists, the intent is on disk, the slot is still READY.
			ext, _ := f.Submit(context.Background(), &w, id)
			_ = ext
			if err := r.db.PutIntent(id, intentAt(time.Now().Add(-time.Second))); err != nil {
				t.Fatal(err)
			}
			r.step(now)
			st := r.state("wf", id.Time)
			if st.Status != slot.Running {
				t.Fatalf("%+v", st)
			}
			if withRecover {
				if st.ExternalID != ext || len(f.submitted()) != 1 {
					t.Fatalf("recovered %q, want %q; submits %v", st.ExternalID, ext, f.submitted())
				}
			} else if len(f.submitted()) != 2 {
				t.Fatalf("submits %v", f.submitted())
			}
			if _, left, _ := r.db.GetIntent(id); left {
				t.Fatal("intent left behind")
			}
		})
	}
}

func TestLoadErrorsAndReload(t *testing.T) {
	r := newRig(t, nil, fixture.Hourly("a"))
	fixture.WriteProject(t, r.wdir, "q", fixture.Hourly("b"), fixture.Hourly("a")) // duplicate a
	if err := os.WriteFile(filepath.Join(r.wdir, "bad.json"), []byte(`{"format":"celos.dev/workflows/v1","proj`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.wdir, "old.json"), []byte(`{"format":"celos.dev/workflows/v0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2024-01-01T00:30Z"))
	if ids := r.e.WorkflowIDs(); strings.Join(ids, ",") != "a" {
		t.Fatalf("ids %v", ids)
	}
	le := r.e.LoadErrors()
	if len(le) != 3 || le[0].File != "bad.json" || le[1].File != "old.json" || le[2].File != "q.json" || !strings.Contains(le[2].Error, `workflow id "a" belongs to project p (p.json)`) {
		t.Fatalf("load errors %+v", le)
	}
	// A truncated rewrite of a good file keeps its previous version.
	if err := os.WriteFile(filepath.Join(r.wdir, "p.json"), []byte(`{"format":`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2024-01-01T00:30Z"))
	if ids := r.e.WorkflowIDs(); strings.Join(ids, ",") != "a" {
		t.Fatalf("ids after truncation %v", ids)
	}
	// Removing p.json frees id a for q.json.
	os.Remove(filepath.Join(r.wdir, "p.json"))
	r.step(ts("2024-01-01T00:30Z"))
	if ids := r.e.WorkflowIDs(); strings.Join(ids, ",") != "a,b" {
		t.Fatalf("ids after removal %v", ids)
	}
	var _ scheduler.LoadError
}

func TestDependentScheduleErrorsOnlyThatWorkflow(t *testing.T) {
	dep := fixture.Hourly("dep")
	dep.Schedule = workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: "missing"}
	ok := fixture.Hourly("ok")
	ok.StartTime = ts("2024-01-01T00:00Z")
	r := newRig(t, nil, dep, ok)
	rep := r.step(ts("2024-01-01T00:30Z"))
	if rep.Failed != 1 || rep.Workflows != 1 {
		t.Fatalf("%+v", rep)
	}
	if r.state("ok", ts("2024-01-01T00:00Z")).Status != slot.Ready {
		t.Fatal("ok not stepped")
	}
	if _, err := r.e.Slots(context.Background(), "dep", ts("2024-01-01T00:00Z"), ts("2024-01-01T01:00Z")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Slots of broken dependent: %v", err)
	}
}

type panicky struct{ *fakeService }

func (panicky) Submit(context.Context, *workflow.Workflow, slot.ID) (string, error) { panic("boom") }

func TestPanicInAServiceIsASlotError(t *testing.T) {
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = ts("2024-01-01T00:00Z"), ts("2024-01-01T00:00Z")
	r := newRig(t, panicky{newFake()}, a, b)
	now := ts("2024-01-01T00:30Z")
	r.step(now)
	rep := r.step(now)
	if rep.Errors["submit"] != 2 || len(r.e.Problems("a")) != 1 || !strings.Contains(r.e.Problems("a")[0].Error, "boom") {
		t.Fatalf("%+v %v", rep, r.e.Problems(""))
	}
	if st := r.state("a", ts("2024-01-01T00:00Z")); st.Status != slot.Ready {
		t.Fatalf("%+v", st)
	}
}

func TestStepIDs(t *testing.T) {
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = ts("2024-01-01T00:00Z"), ts("2024-01-01T00:00Z")
	r := newRig(t, nil, a, b)
	now := ts("2024-01-01T00:30Z")
	if err := r.e.Step(context.Background(), now, []string{"a", "a", "nope"}); err != nil {
		t.Fatal(err)
	}
	if st := r.state("a", ts("2024-01-01T00:00Z")); st.Status != slot.Ready {
		t.Fatalf("a stepped once: %+v", st)
	}
	if st := r.state("b", ts("2024-01-01T00:00Z")); st.Status != slot.Waiting {
		t.Fatalf("b not named but stepped: %+v", st)
	}
}

// TestReloadParsesOnlyChangedFiles: a file whose content is unchanged is
// not parsed again, whatever happens to its metadata (a new mtime, a copy
// renamed over it); a change of content is (see also
// TestSameSizeSameMtimeReplacementIsReloaded).
func TestReloadParsesOnlyChangedFiles(t *testing.T) {
	r := newRig(t, nil, fixture.Hourly("a1"))
	path := filepath.Join(r.wdir, "p.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	r.step(ts("2024-01-01T00:30Z"))
	first := r.e.config()
	// Same content, new mtime, new inode: not re-parsed, config kept.
	data, _ := os.ReadFile(path)
	os.WriteFile(path+".tmp", data, 0o644)
	os.Rename(path+".tmp", path)
	os.Chtimes(path, fi.ModTime().Add(time.Hour), fi.ModTime().Add(time.Hour))
	r.step(ts("2024-01-01T00:30Z"))
	if r.e.config() != first {
		t.Fatal("config rebuilt although no file's content changed")
	}
	// New content: re-parsed.
	os.WriteFile(path, []byte(strings.ReplaceAll(string(data), `"a1"`, `"b1"`)), 0o644)
	r.step(ts("2024-01-01T00:30Z"))
	if ids := r.e.WorkflowIDs(); strings.Join(ids, ",") != "b1" {
		t.Fatalf("changed file not re-parsed: %v", ids)
	}
}

func TestCorruptStateFileSkipsOnlyThatSlot(t *testing.T) {
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = ts("2024-01-01T00:00Z"), ts("2024-01-01T00:00Z")
	wdir, ddir := t.TempDir(), t.TempDir()
	fixture.WriteProject(t, wdir, "p", a, b)
	day := filepath.Join(ddir, "state", "a", "2024-01-01")
	os.MkdirAll(day, 0o755)
	os.WriteFile(filepath.Join(day, "00:00:00.000Z"), []byte(`{"status":"SUCC`), 0o644) // cut short
	db, err := statedb.Open(ddir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Step(context.Background(), ts("2024-01-01T01:30Z"), nil); err != nil {
		t.Fatal(err)
	}
	get := func(wf, at string) slot.State {
		st, _, _ := db.Get(slot.ID{Workflow: wf, Time: ts(at)})
		return st
	}
	if get("a", "2024-01-01T01:00Z").Status != slot.Ready || get("b", "2024-01-01T00:00Z").Status != slot.Ready {
		t.Fatal("other slots not stepped")
	}
	probs := e.Problems("a")
	if len(probs) != 1 || probs[0].Op != "state" || !strings.Contains(probs[0].Error, filepath.Join(day, "00:00:00.000Z")) {
		t.Fatalf("problems %+v", probs)
	}
	data, _ := os.ReadFile(filepath.Join(day, "00:00:00.000Z"))
	if string(data) != `{"status":"SUCC` {
		t.Fatal("corrupt file rewritten by a step")
	}
	// A rerun repairs it.
	if err := e.Rerun(context.Background(), slot.ID{Workflow: "a", Time: ts("2024-01-01T00:00Z")}, ts("2024-01-01T01:30Z")); err != nil {
		t.Fatal(err)
	}
	if st := get("a", "2024-01-01T00:00Z"); st.Status != slot.Waiting {
		t.Fatalf("after rerun %+v", st)
	}
	if err := e.Step(context.Background(), ts("2024-01-01T01:30Z"), nil); err != nil {
		t.Fatal(err)
	}
	if st := get("a", "2024-01-01T00:00Z"); st.Status != slot.Ready || len(e.Problems("a")) != 0 {
		t.Fatalf("after step %+v %v", st, e.Problems("a"))
	}
}

// TestOddEntriesInWorkflowsDir: a dangling symlink or a directory named
// *.json is reported as a load error, not skipped silently; a symlink to a
// good file loads.
func TestOddEntriesInWorkflowsDir(t *testing.T) {
	r := newRig(t, nil, fixture.Hourly("a"))
	if err := os.Symlink(filepath.Join(r.wdir, "nowhere"), filepath.Join(r.wdir, "dangling.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(r.wdir, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	fixture.WriteProject(t, other, "linked", fixture.Hourly("b"))
	if err := os.Symlink(filepath.Join(other, "linked.json"), filepath.Join(r.wdir, "linked.json")); err != nil {
		t.Fatal(err)
	}
	r.step(ts("2024-01-01T00:30Z"))
	if ids := strings.Join(r.e.WorkflowIDs(), ","); ids != "a,b" {
		t.Fatalf("ids %s, want a,b", ids)
	}
	got := map[string]string{}
	for _, le := range r.e.LoadErrors() {
		got[le.File] = le.Error
	}
	if !strings.Contains(got["dangling.json"], "symbolic link") || !strings.Contains(got["dir.json"], "not a regular file") || len(got) != 2 {
		t.Fatalf("load errors %v", got)
	}
}

// TestLeftoverIntentOfEarlierAttempt: a crash between the durable RUNNING
// write and the removal of the submit intent leaves an intent on a RUNNING
// slot. When that job fails, the retry (or a rerun) must submit a new job,
// not "recover" the one that already failed.
func TestLeftoverIntentOfEarlierAttempt(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.MaxRetryCount = 2
	now := ts("2024-01-01T00:30Z")
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	since := time.Now().Add(-time.Hour) // before the first job: Recover would find it

	// stepUntil steps until the slot has status want (a few steps at most).
	stepUntil := func(t *testing.T, r *rig, want slot.Status) slot.State {
		t.Helper()
		for range 5 {
			r.step(now)
			if st := r.state("wf", id.Time); st.Status == want {
				return st
			}
		}
		t.Fatalf("slot never %s: %+v", want, r.state("wf", id.Time))
		return slot.State{}
	}
	tests := []struct {
		name string
		// plant puts the leftover intent (the slot is RUNNING job-1) and
		// leads the slot to a new submission.
		plant func(t *testing.T, r *rig, f *fakeService)
	}{
		{"intent on RUNNING slot, then retry", func(t *testing.T, r *rig, f *fakeService) {
			if err := r.db.PutIntent(id, store.Intent{Attempt: 0, Time: since}); err != nil {
				t.Fatal(err)
			}
			f.finish(id, false)
		}},
		{"intent of attempt 0 seen at retry 1", func(t *testing.T, r *rig, f *fakeService) {
			f.finish(id, false)
			stepUntil(t, r, slot.Waiting)
			if err := r.db.PutIntent(id, store.Intent{Attempt: 0, Time: since}); err != nil {
				t.Fatal(err)
			}
		}},
		{"intent left on a rerun slot", func(t *testing.T, r *rig, f *fakeService) {
			f.finish(id, true)
			stepUntil(t, r, slot.Success)
			if err := r.db.PutIntent(id, store.Intent{Attempt: 0, Time: since}); err != nil {
				t.Fatal(err)
			}
			if err := r.e.Rerun(context.Background(), id, now); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			r := newRig(t, recoverer{f}, w)
			if st := stepUntil(t, r, slot.Running); st.ExternalID != "job-1" {
				t.Fatalf("first submission %+v", st)
			}
			tc.plant(t, r, f)
			st := stepUntil(t, r, slot.Running)
			if st.ExternalID != "job-2" || len(f.submitted()) != 2 {
				t.Fatalf("slot %+v after the earlier job ended, submits %v; want a new job job-2", st, f.submitted())
			}
			if _, left, err := r.db.GetIntent(id); err != nil || left {
				t.Fatalf("intent left behind (err %v)", err)
			}
		})
	}
}

// TestUnreadableEntryDoesNotRebuildEveryStep: while a dangling symlink sits
// in the workflows directory, an unchanged directory keeps its config (no
// rebuild, no re-logged load errors); removing the entry rebuilds it.
func TestUnreadableEntryDoesNotRebuildEveryStep(t *testing.T) {
	r := newRig(t, nil, fixture.Hourly("a"))
	dangling := filepath.Join(r.wdir, "dangling.json")
	if err := os.Symlink(filepath.Join(r.wdir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	now := ts("2024-01-01T00:30Z")
	r.step(now)
	first := r.e.config()
	if len(first.loadErrs) != 1 {
		t.Fatalf("load errors %v, want the dangling symlink", first.loadErrs)
	}
	r.step(now)
	if r.e.config() != first {
		t.Fatal("config rebuilt by a step although the directory did not change")
	}
	if err := os.Remove(dangling); err != nil {
		t.Fatal(err)
	}
	r.step(now)
	if c := r.e.config(); c == first || len(c.loadErrs) != 0 {
		t.Fatalf("config not rebuilt after the bad entry went: same %v, load errors %v", c == first, c.loadErrs)
	}
}

// panicRecoverer is a service whose Recover panics.
type panicRecoverer struct{ *fakeService }

func (panicRecoverer) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	panic("recover exploded")
}

// TestKillWithPanickingRecover: a panic in the service's Recover during a
// kill is an error of that kill (the slot stays as it was), not a crash.
func TestKillWithPanickingRecover(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	now := ts("2024-01-01T00:30Z")
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	f := newFake()
	r := newRig(t, panicRecoverer{f}, w)
	r.step(now) // READY
	if st := r.state("wf", id.Time); st.Status != slot.Ready {
		t.Fatalf("%+v", st)
	}
	if err := r.db.PutIntent(id, intentAt(time.Now())); err != nil {
		t.Fatal(err)
	}
	err := r.e.Kill(context.Background(), id)
	if err == nil || !strings.Contains(err.Error(), "recover exploded") {
		t.Fatalf("kill: %v, want the panic as an error", err)
	}
	if st := r.state("wf", id.Time); st.Status != slot.Ready {
		t.Fatalf("slot %+v after a failed kill, want READY", st)
	}
}

// TestPersistentProblemLoggedOnce: a submit error that persists over
// several steps is logged as a warning when it appears and when it
// changes, not at every step (an outage would flood the log); the problem
// stays visible through Problems all along.
func TestPersistentProblemLoggedOnce(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	r := newRig(t, nil, w)
	var buf bytes.Buffer
	r.e.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	now := ts("2024-01-01T00:30Z")
	r.step(now) // WAITING -> READY
	r.svc.submitErr = errors.Join(external.ErrUnavailable, errors.New("connection refused"))
	for range 3 {
		r.step(now)
	}
	if n := strings.Count(buf.String(), "slot left as it was"); n != 1 {
		t.Fatalf("the same problem was logged %d times over 3 steps, want once:\n%s", n, buf.String())
	}
	if len(r.e.Problems("wf")) != 1 {
		t.Fatalf("problems %+v", r.e.Problems("wf"))
	}
	r.svc.submitErr = errors.Join(external.ErrUnavailable, errors.New("503 safe mode"))
	r.step(now)
	if n := strings.Count(buf.String(), "slot left as it was"); n != 2 {
		t.Fatalf("a changed problem was not logged (%d warnings):\n%s", n, buf.String())
	}
}

// TestFailuresLoggedAtWarn: a job that fails (retried, then final) is
// logged at WARN with its job and reason; a success stays at INFO.
func TestFailuresLoggedAtWarn(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.MaxRetryCount = 1
	r := newRig(t, nil, w)
	var buf bytes.Buffer
	r.e.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	now := ts("2024-01-01T00:30Z")
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	for _, want := range []string{"to=WAITING", "to=FAILURE"} {
		r.step(now) // → READY
		r.step(now) // → RUNNING
		r.svc.finish(id, false)
		r.step(now) // → WAITING (retry) or FAILURE
		if !strings.Contains(buf.String(), "level=WARN msg=\"slot transition\"") || !strings.Contains(buf.String(), want) {
			t.Fatalf("no WARN transition %s in the log:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "to=READY") || strings.Contains(buf.String(), "to=RUNNING") {
		t.Fatalf("a transition that is not a failure was logged at WARN:\n%s", buf.String())
	}
}

// TestNeverStartedJobSubmittedAgain: a RUNNING slot whose job the service
// reports as never started (nothing of it ran) goes back to READY without
// counting a retry, and is submitted again at the next step; with no
// retries configured it does not fail.
func TestNeverStartedJobSubmittedAgain(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.MaxRetryCount = 0
	r := newRig(t, nil, w)
	now := ts("2024-01-01T00:30Z")
	r.step(now)
	r.step(now)
	s0 := ts("2024-01-01T00:00Z")
	first := r.state("wf", s0)
	if first.Status != slot.Running {
		t.Fatalf("slot %+v, want RUNNING", first)
	}
	r.svc.mu.Lock()
	r.svc.jobs[first.ExternalID].status = external.Status{NeverStarted: true, Detail: "never started"}
	r.svc.mu.Unlock()
	r.step(now)
	if st := r.state("wf", s0); st.Status != slot.Ready || st.RetryCount != 0 || st.ExternalID != "" {
		t.Fatalf("after a job that never started: %+v, want READY, retry count 0, no job", st)
	}
	r.step(now)
	again := r.state("wf", s0)
	if again.Status != slot.Running || again.ExternalID == first.ExternalID || again.RetryCount != 0 {
		t.Fatalf("the next step: %+v, want RUNNING with a new job and retry count 0 (first job %s)", again, first.ExternalID)
	}
}

// intentClock is a service that records, for each Submit, the intent time
// in its context and the stored intent, then moves the engine's clock on
// by each (a slow service: a long batch).
type intentClock struct {
	*fakeService
	db   Store
	now  time.Time
	each time.Duration
	seen []struct{ at, ctxIntent, stored time.Time }
}

func (s *intentClock) clock() time.Time { return s.now }

// SubmitWindow: its submissions are refused 30 s after their intent.
func (s *intentClock) SubmitWindow() time.Duration { return 30 * time.Second }

func (s *intentClock) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	in, _, _ := s.db.GetIntent(id)
	t, _ := external.IntentTime(ctx)
	s.seen = append(s.seen, struct{ at, ctxIntent, stored time.Time }{s.now, t, in.Time})
	s.now = s.now.Add(s.each)
	return s.fakeService.Submit(ctx, w, id)
}

// TestSubmitCarriesAFreshIntent: every Submit gets the time of its slot's
// stored submit intent (external.WithIntent), and in a batch that takes
// longer than a third of the service's submit window the intents of the
// rest are written again, so that no Submit is made under an intent older
// than that plus one submission (a service refuses to send under an
// expired one).
func TestSubmitCarriesAFreshIntent(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	w.SchedulingStrategy.Concurrency = 8
	r := newRig(t, nil, w)
	svc := &intentClock{fakeService: r.svc, db: r.db, now: ts("2026-01-01T00:00Z"), each: 4 * time.Second}
	e, err := New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard, Clock: svc.clock})
	if err != nil {
		t.Fatal(err)
	}
	now := ts("2024-01-01T07:30Z")
	for range 2 { // WAITING → READY, then the submissions
		if err := e.Step(context.Background(), now, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(svc.seen) != 8 {
		t.Fatalf("%d submissions, want 8", len(svc.seen))
	}
	for i, s := range svc.seen {
		if !s.ctxIntent.Equal(s.stored) {
			t.Errorf("submission %d: its context's intent %s, the stored intent %s", i, s.ctxIntent, s.stored)
		}
		if limit := svc.SubmitWindow()/3 + svc.each; s.at.Sub(s.ctxIntent) > limit {
			t.Errorf("submission %d made under an intent %s old, want at most %s", i, s.at.Sub(s.ctxIntent), limit)
		}
	}
}
