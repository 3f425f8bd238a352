package engine

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// restartRig is an engine on a file store whose wall clock (submit
// intents) is the time of the step it runs, and which can be restarted:
// a new engine on the same workflows, store and service.
type restartRig struct {
	t   *testing.T
	r   *rig
	mu  sync.Mutex
	now time.Time
}

func newRestartRig(t *testing.T, svc external.Service, ws ...workflow.Workflow) *restartRig {
	t.Helper()
	rr := &restartRig{t: t, r: newRig(t, svc, ws...)}
	rr.restart()
	return rr
}

func (rr *restartRig) clock() time.Time {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.now
}

// restart replaces the engine by a new one on the same state, as a server
// restart does.
func (rr *restartRig) restart() {
	rr.t.Helper()
	e, err := New(Options{WorkflowsDir: rr.r.wdir, Store: rr.r.db, Clock: rr.clock, Logger: discard,
		Services: rr.r.e.opts.Services})
	if err != nil {
		rr.t.Fatal(err)
	}
	rr.r.e = e
}

func (rr *restartRig) step(at string) {
	rr.t.Helper()
	rr.mu.Lock()
	rr.now = ts(at)
	rr.mu.Unlock()
	rr.r.step(ts(at))
}

// minInterval4h is the run constraint of most tests here: minInterval
// 4h, no timeout.
// spacedWorkflow is workflow id, hourly from 24 November 2026 00:00, up to
// 5 slots at once, with minInterval 4h.
func spacedWorkflow(id string) workflow.Workflow {
	w := fixture.Hourly(id)
	w.StartTime = ts("2026-11-24T00:00Z")
	w.SchedulingStrategy.Concurrency = 5
	w.Constraints = minInterval4h()
	return w
}

// wantConstraintHold fails the test unless e holds a READY slot of wf
// for its run constraints, with a reason containing text.
func wantConstraintHold(t *testing.T, e *Engine, wf, text string) {
	t.Helper()
	if held := problemsOf(e, wf, opConstraint); len(held) == 0 || !strings.Contains(held[0].Error, text) {
		t.Errorf("%s's constraint holds %+v, want one saying %q", wf, held, text)
	}
}

func minInterval4h() *workflow.Constraints {
	return &workflow.Constraints{MinIntervalSeconds: 4 * 3600, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
}

// wantSubmitted fails the test unless the service was asked to run
// exactly the slots want ("DD HH:MM" of submittedTimes, comma-separated),
// in that order; format has a %v for what it was asked.
func (rr *restartRig) wantSubmitted(want, format string) {
	rr.t.Helper()
	if got := submittedTimes(rr.r.svc); strings.Join(got, ",") != want {
		rr.t.Fatalf(format, got)
	}
}

// submittedTimes are the slot times the service was asked to run, as
// "HH:MM" of their day.
func submittedTimes(svc *fakeService) []string {
	var out []string
	for _, id := range svc.submitted() {
		out = append(out, id.Time.Format("02 15:04"))
	}
	return out
}

// TestMinIntervalCountsTheRealSubmissionAfterRestart: a slot that waited
// and was submitted hours after its slot time counts, after a restart, at
// the time it was submitted, not at its slot time: minInterval 4h, slot
// 00:00 submitted at 03:00:30, restart at 03:30: nothing runs before
// 07:00:30 (the slot-time count let 01:00 run at 04:00).
func TestMinIntervalCountsTheRealSubmissionAfterRestart(t *testing.T) {
	w := spacedWorkflow("spaced")
	rr := newRestartRig(t, nil, w)
	rr.step("2026-11-24T03:00Z")    // 00:00, 01:00, 02:00 READY (the data came late)
	rr.step("2026-11-24T03:00:30Z") // 00:00 submitted
	rr.r.svc.finishAll(true)
	rr.step("2026-11-24T03:10Z") // 00:00 SUCCESS
	rr.wantSubmitted("24 00:00", "submitted %v before the restart, want 00:00 only")
	rr.restart()
	rr.step("2026-11-24T03:30Z")
	rr.step("2026-11-24T04:30Z")
	rr.step("2026-11-24T07:00:29Z")
	if got := submittedTimes(rr.r.svc); len(got) != 1 {
		t.Fatalf("after a restart, submitted %v within 4h of the 03:00:30 submission, want 00:00 only", got)
	}
	wantConstraintHold(t, rr.r.e, "spaced", "the last submission was at 2026-11-24T03:00:30.000Z, the next may be at 2026-11-24T07:00:30.000Z")
	rr.step("2026-11-24T07:00:30Z")
	rr.wantSubmitted("24 00:00,24 01:00", "submitted %v once minInterval passed, want 00:00 then 01:00")
}

// TestMaxRunsCountsTheRealSubmissionsAfterRestart: maxRuns 2 per 24h;
// slots 00:00 and 01:00 were submitted at 10:00:30 and 11:00:30. After a
// restart the next day at 01:30, both still count (the slot-time count
// had forgotten them: a third run at 01:30, 15 hours after the first).
func TestMaxRunsCountsTheRealSubmissionsAfterRestart(t *testing.T) {
	w := fixture.Hourly("capped")
	w.StartTime = ts("2026-11-24T00:00Z")
	w.Constraints = &workflow.Constraints{MaxRuns: &workflow.MaxRuns{Count: 2, PeriodSeconds: 86400},
		TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	rr := newRestartRig(t, nil, w)
	rr.step("2026-11-24T10:00Z")    // 00:00 … 09:00 READY
	rr.step("2026-11-24T10:00:30Z") // 00:00 submitted
	rr.r.svc.finishAll(true)
	rr.step("2026-11-24T11:00Z")    // 00:00 SUCCESS, 10:00 READY
	rr.step("2026-11-24T11:00:30Z") // 01:00 submitted
	rr.r.svc.finishAll(true)
	rr.step("2026-11-24T12:00Z") // 01:00 SUCCESS; the others held
	rr.wantSubmitted("24 00:00,24 01:00", "submitted %v before the restart, want 00:00 and 01:00")
	rr.restart()
	rr.step("2026-11-25T01:30Z")
	rr.step("2026-11-25T10:00:29Z")
	if got := submittedTimes(rr.r.svc); len(got) != 2 {
		t.Fatalf("after a restart, submitted %v: more than 2 in the 24h after 10:00:30", got)
	}
	wantConstraintHold(t, rr.r.e, "capped", "maxRuns 2 per 24h: 2 submissions in the last 24h, the next may be at 2026-11-25T10:00:30.000Z")
	rr.step("2026-11-25T10:00:30Z")
	rr.wantSubmitted("24 00:00,24 01:00,24 02:00", "submitted %v once the first submission aged out, want 02:00 next")
}

// TestRunsOfOlderStateCountAtSlotTime: state without a record of
// submission times (written by an older celos, or whose record was lost)
// counts each slot of the look-back that had a job at its slot time, the
// earliest it can have been submitted.
func TestRunsOfOlderStateCountAtSlotTime(t *testing.T) {
	w := spacedWorkflow("old")
	rr := newRestartRig(t, nil, w)
	rr.step("2026-11-24T03:00Z")
	rr.step("2026-11-24T03:00:30Z") // 00:00 submitted
	rr.r.svc.finishAll(true)
	rr.step("2026-11-24T03:10Z")
	if err := os.RemoveAll(filepath.Join(rr.r.ddir, "run")); err != nil {
		t.Fatal(err)
	}
	rr.restart()
	rr.step("2026-11-24T03:59Z")
	if got := submittedTimes(rr.r.svc); len(got) != 1 {
		t.Fatalf("submitted %v within 4h of the 00:00 slot", got)
	}
	rr.step("2026-11-24T04:00Z")
	rr.wantSubmitted("24 00:00,24 01:00", "without a record: submitted %v, want 01:00 at 04:00 (00:00 counted at its slot time)")
}

// TestRunRecoveredAfterACrashCountsFromItsRecovery: the process died after
// the service accepted a job and before anything recorded it (the slot is
// READY with a submit intent, no record of the submission). The restarted
// engine recovers the job and counts it at the step that recovered it —
// later than the real submission, never earlier: the next slot waits
// minInterval from then.
func TestRunRecoveredAfterACrashCountsFromItsRecovery(t *testing.T) {
	w := spacedWorkflow("crashed")
	f := newFake()
	rr := newRestartRig(t, recoverer{f}, w)
	rr.step("2026-11-24T03:00Z") // 00:00, 01:00, 02:00 READY
	id := slot.ID{Workflow: "crashed", Time: ts("2026-11-24T00:00Z")}
	// The crash: intent written, job accepted, nothing else.
	if err := rr.r.db.PutIntent(id, intentAt(time.Now().Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Submit(context.Background(), &w, id); err != nil {
		t.Fatal(err)
	}
	rr.restart()
	rr.step("2026-11-24T05:00Z") // 00:00 recovered: RUNNING
	if st := rr.r.state("crashed", id.Time); st.Status != slot.Running {
		t.Fatalf("00:00 is %s, want RUNNING with the recovered job", st.Status)
	}
	f.finishAll(true)
	rr.restart()
	rr.step("2026-11-24T08:59Z")
	if got := submittedTimes(f); len(got) != 1 {
		t.Fatalf("submitted %v within 4h of the recovery at 05:00", got)
	}
	rr.step("2026-11-24T09:00Z")
	if got := submittedTimes(f); strings.Join(got, ",") != "24 00:00,24 01:00" {
		t.Fatalf("submitted %v, want 01:00 at 09:00", got)
	}
}

// TestRunsRecordNotWritten: when the store cannot write the record of
// submissions (run/ is not a directory), the step that submitted says so
// (ErrPersist, a "persist" error, the log); the slot is RUNNING all the
// same and the submission counts in the engine's memory.
func TestRunsRecordNotWritten(t *testing.T) {
	w := spacedWorkflow("spaced")
	rr := newRestartRig(t, nil, w)
	logs := &logCounter{}
	rr.r.e.log = slog.New(slog.NewTextHandler(logs, nil))
	if err := os.WriteFile(filepath.Join(rr.r.ddir, "run"), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	rr.step("2026-11-24T03:00Z")
	err := rr.r.e.Step(context.Background(), ts("2026-11-24T03:00:30Z"), nil)
	if !errors.Is(err, ErrPersist) || rr.r.e.LastStep().Errors["persist"] != 1 {
		t.Fatalf("step: %v, errors %v; want ErrPersist and one persist error", err, rr.r.e.LastStep().Errors)
	}
	if logs.count("submissions not recorded") != 1 {
		t.Errorf("the log does not say the submissions were not recorded:\n%s", logs.String())
	}
	if st := rr.r.state("spaced", ts("2026-11-24T00:00Z")); st.Status != slot.Running {
		t.Fatalf("00:00 is %s, want RUNNING", st.Status)
	}
	rr.step("2026-11-24T07:00:29Z")
	if got := submittedTimes(rr.r.svc); len(got) != 1 {
		t.Fatalf("submitted %v within 4h of 03:00:30", got)
	}
}

// TestRunsRecordUnreadable: a record of submissions that does not parse
// is logged when the engine reads it, and the slots that had a job count
// at their slot times; the next submission writes the record anew.
func TestRunsRecordUnreadable(t *testing.T) {
	w := spacedWorkflow("spaced")
	rr := newRestartRig(t, nil, w)
	rr.step("2026-11-24T03:00Z")
	rr.step("2026-11-24T03:00:30Z") // 00:00 submitted
	rr.r.svc.finishAll(true)
	rr.step("2026-11-24T03:10Z")
	if err := os.WriteFile(filepath.Join(rr.r.ddir, "run", "spaced"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	rr.restart()
	logs := &logCounter{}
	rr.r.e.log = slog.New(slog.NewTextHandler(logs, nil))
	rr.step("2026-11-24T04:00Z") // 00:00 counted at 00:00: 01:00 runs
	rr.wantSubmitted("24 00:00,24 01:00", "with an unreadable record: submitted %v, want 01:00 at 04:00")
	if logs.count("record of submissions not read") != 1 || strings.Contains(logs.String(), "garbage") {
		t.Errorf("the log of the unreadable record:\n%s", logs.String())
	}
	rr.r.svc.finishAll(true)
	rr.step("2026-11-24T04:10Z")
	rr.restart()
	rr.step("2026-11-24T07:59Z")
	if got := submittedTimes(rr.r.svc); len(got) != 2 {
		t.Fatalf("after another restart: submitted %v within 4h of 04:00 (the record written anew)", got)
	}
}
