package command

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
)

// TestAttempts: every run of a slot is listed, oldest first, with its
// times, exit code and log; other slots' jobs and stray entries are not.
func TestAttempts(t *testing.T) {
	dir := t.TempDir()
	s := newService(t, dir)
	ctx := context.Background()
	// Fails the first time (no marker yet), succeeds the second.
	marker := filepath.Join(t.TempDir(), "marker")
	w := newWorkflow("sh", "-c", `if [ -e "`+marker+`" ]; then echo second; else touch "`+marker+`"; echo first >&2; exit 3; fi`)
	var ids []string
	for range 2 {
		ext, err := s.Submit(ctx, w, sid)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, s, w, ext)
		ids = append(ids, ext)
	}
	other := slot.ID{Workflow: "wc", Time: sid.Time.Add(time.Hour)}
	ext3, err := s.Submit(ctx, w, other)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, w, ext3)
	os.WriteFile(filepath.Join(dir, "wc", "notajob"), nil, 0o644)

	got, err := s.Attempts(ctx, w, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d attempts, want 2: %+v", len(got), got)
	}
	three, zero := 3, 0
	want := []scheduler.Attempt{
		{ExternalID: ids[0], Status: "exit 3", ExitCode: &three, HasLog: true},
		{ExternalID: ids[1], Status: "exit 0", Success: true, ExitCode: &zero, HasLog: true},
	}
	times := cmp.Transformer("times", func(a scheduler.Attempt) scheduler.Attempt {
		a.Submitted, a.Started, a.Ended = time.Time{}, time.Time{}, time.Time{}
		return a
	})
	if d := cmp.Diff(want, got, times); d != "" {
		t.Errorf("attempts (-want +got):\n%s", d)
	}
	for i, a := range got {
		if a.Submitted.IsZero() || a.Started.Before(a.Submitted) || a.Ended.Before(a.Started) {
			t.Errorf("attempt %d: times out of order: %v %v %v", i, a.Submitted, a.Started, a.Ended)
		}
	}
	if !got[0].Ended.Before(got[1].Submitted) && !got[0].Ended.Equal(got[1].Submitted) {
		t.Errorf("the first attempt ended at %v, after the second was submitted at %v", got[0].Ended, got[1].Submitted)
	}

	// A slot without jobs, a workflow without a directory: no attempts.
	for _, id := range []slot.ID{{Workflow: "wc", Time: sid.Time.Add(-time.Hour)}, {Workflow: "nothing", Time: sid.Time}} {
		if got, err := s.Attempts(ctx, w, id); err != nil || len(got) != 0 {
			t.Errorf("%s: %v, %v; want none", id, got, err)
		}
	}
	// A hostile workflow id never leaves the jobs directory.
	if _, err := s.Attempts(ctx, w, slot.ID{Workflow: "..", Time: sid.Time}); err == nil {
		t.Error("workflow id .. accepted")
	}
}

// TestAttemptsRunningAndKilled: a running job is listed as running, and
// once killed as killed, without an exit code.
func TestAttemptsRunningAndKilled(t *testing.T) {
	s := newService(t, t.TempDir())
	ctx := context.Background()
	w := newWorkflow("sleep", "60")
	ext, err := s.Submit(ctx, w, sid)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Attempts(ctx, w, sid)
	if err != nil || len(got) != 1 || !got[0].Running || got[0].Status != "running" || got[0].Started.IsZero() {
		t.Fatalf("running attempt: %+v, %v", got, err)
	}
	if err := s.Kill(ctx, w, ext); err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, w, ext)
	got, err = s.Attempts(ctx, w, sid)
	if err != nil || len(got) != 1 || got[0].Running || got[0].Success || got[0].Status != "killed" || got[0].ExitCode != nil || got[0].Ended.IsZero() {
		t.Fatalf("killed attempt: %+v, %v", got, err)
	}
}
