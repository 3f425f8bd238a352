package cluster

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// localJobs is a real command service in a directory of its own (one
// "host").
func localJobs(t *testing.T) *command.Service {
	t.Helper()
	s, err := command.New(t.TempDir(), command.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Wait(ctx)
	})
	return s
}

func cmdWorkflow(argv ...string) *workflow.Workflow {
	return &workflow.Workflow{ID: "cmd", ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: argv}}
}

var cmdSlot = slot.ID{Workflow: "cmd", Time: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}

func waitStatus(t *testing.T, j *Jobs, w *workflow.Workflow, ext string, what string, ok func(external.Status) bool) external.Status {
	t.Helper()
	var st external.Status
	eventually(t, time.Minute, what, func() bool {
		var err error
		st, err = j.Status(ctxT(t), w, ext)
		if err != nil {
			t.Fatal(err)
		}
		return ok(st)
	})
	return st
}

// TestJobEndSeenFromAnotherInstance: a job runs on the host of the
// instance that submitted it; the other instance reads its state from the
// row, running while the host beats, then its end once published.
func TestJobEndSeenFromAnotherInstance(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	b := member(t, pool, "b", time.Minute)
	ja, jb := NewJobs(a, localJobs(t), JobsOptions{}), NewJobs(b, localJobs(t), JobsOptions{})
	w := cmdWorkflow("sh", "-c", "sleep 1; exit 3")
	ext, err := ja.Submit(ctxT(t), w, cmdSlot)
	if err != nil {
		t.Fatal(err)
	}
	st, err := jb.Status(ctxT(t), w, ext)
	if err != nil || !st.Running || !strings.Contains(st.Detail, "instance a") {
		t.Fatalf("b's view of a's running job: %+v %v", st, err)
	}
	// b cannot read a's disk: it sees the end once a publishes it.
	eventually(t, time.Minute, "a publishes the job's end", func() bool {
		if err := ja.Publish(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		st, err = jb.Status(ctxT(t), w, ext)
		return err == nil && !st.Running
	})
	if st.Success || st.Detail != "exit 3" {
		t.Fatalf("b's view of a's finished job: %+v, want a failure with exit 3", st)
	}
	// Recover finds a's job from b (the slot's intent was a's).
	got, found, err := jb.Recover(ctxT(t), w, cmdSlot, time.Now().Add(-time.Hour))
	if err != nil || !found || got != ext {
		t.Fatalf("b's Recover: %q %v %v, want %q", got, found, err, ext)
	}
	if _, found, _ := jb.Recover(ctxT(t), w, cmdSlot, time.Now().Add(time.Minute)); found {
		t.Fatal("Recover found a job submitted before the intent")
	}
}

// TestJobLostWhenHostSilent: the instance running a job stops heart-beating
// for longer than the grace: another instance declares the job lost (a
// failure, so the slot follows its retry rules); when the first comes back
// it kills the job's process.
func TestJobLostWhenHostSilent(t *testing.T) {
	pool := openPool(t, newDB(t))
	const lease = 600 * time.Millisecond
	a := member(t, pool, "a", lease)
	b := member(t, pool, "b", lease)
	la := localJobs(t)
	ja := NewJobs(a, la, JobsOptions{Grace: 2 * lease})
	jb := NewJobs(b, localJobs(t), JobsOptions{Grace: 2 * lease})
	w := cmdWorkflow("sleep", "300")
	ext, err := ja.Submit(ctxT(t), w, cmdSlot)
	if err != nil {
		t.Fatal(err)
	}
	// a stops beating (paused, partitioned): after the grace b declares
	// the job lost.
	st := waitStatus(t, jb, w, ext, "b declares a's job lost", func(st external.Status) bool { return !st.Running })
	if st.Success || !strings.HasPrefix(st.Detail, "lost: instance a") {
		t.Fatalf("b's verdict: %+v, want a failure naming the lost instance", st)
	}
	if local, err := la.Status(ctxT(t), w, ext); err != nil || !local.Running {
		t.Fatalf("the process on a's host: %+v %v, want still running (a is away)", local, err)
	}
	// a comes back: it kills the process.
	tick(t, a)
	if err := ja.Publish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	local, err := la.Status(ctxT(t), w, ext)
	if err != nil || local.Running {
		t.Fatalf("the process on a's host after a came back: %+v %v, want killed", local, err)
	}
	// Everyone keeps seeing it lost.
	for _, j := range []*Jobs{ja, jb} {
		if st, err := j.Status(ctxT(t), w, ext); err != nil || st.Running || st.Success || !strings.HasPrefix(st.Detail, "lost:") {
			t.Fatalf("status after the reaping: %+v %v", st, err)
		}
	}
}

// TestKillFromAnotherInstance: an operator's kill served by an instance
// that does not run the job is carried out by the one that does.
func TestKillFromAnotherInstance(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	b := member(t, pool, "b", time.Minute)
	la := localJobs(t)
	ja, jb := NewJobs(a, la, JobsOptions{}), NewJobs(b, localJobs(t), JobsOptions{})
	w := cmdWorkflow("sleep", "300")
	ext, err := ja.Submit(ctxT(t), w, cmdSlot)
	if err != nil {
		t.Fatal(err)
	}
	if err := jb.Kill(ctxT(t), w, ext); err != nil {
		t.Fatal(err)
	}
	if err := ja.Publish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if local, err := la.Status(ctxT(t), w, ext); err != nil || local.Running {
		t.Fatalf("a's process after b's kill: %+v %v, want ended", local, err)
	}
	st, err := jb.Status(ctxT(t), w, ext)
	if err != nil || st.Running || st.Success {
		t.Fatalf("b's view after the kill: %+v %v", st, err)
	}
}
