package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
	// b keeps beating (it judges a's silence only once it has been
	// connected for the grace itself).
	runB, stopB := context.WithCancel(context.Background())
	doneB := make(chan struct{})
	go func() { defer close(doneB); b.Run(runB) }()
	t.Cleanup(func() { stopB(); <-doneB })
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
	if err != nil || st.Running || st.Success || !st.Killed {
		t.Fatalf("b's view after the kill: %+v %v, want killed", st, err)
	}
}

// TestOwnKillSeenFromAnotherInstance: a kills its own job (an operator's
// kill through a) and stops before writing the slot KILLED; b, taking the
// workflow over, sees the job as killed, not as a failure to retry.
func TestOwnKillSeenFromAnotherInstance(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	b := member(t, pool, "b", time.Minute)
	ja, jb := NewJobs(a, localJobs(t), JobsOptions{}), NewJobs(b, localJobs(t), JobsOptions{})
	w := cmdWorkflow("sleep", "300")
	ext, err := ja.Submit(ctxT(t), w, cmdSlot)
	if err != nil {
		t.Fatal(err)
	}
	if err := ja.Kill(ctxT(t), w, ext); err != nil {
		t.Fatal(err)
	}
	var st external.Status
	eventually(t, time.Minute, "a publishes the job's end", func() bool {
		if err := ja.Publish(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		st, err = jb.Status(ctxT(t), w, ext)
		return err == nil && !st.Running
	})
	if st.Success || !st.Killed {
		t.Fatalf("b's view of the job a killed: %+v, want killed", st)
	}
}

// freezing is a host whose instance freezes (kill -9, power cut, a stop
// past the grace) right after its command service started a job: Submit
// reports the job on started and then blocks until thaw is closed.
type freezing struct {
	*command.Service
	started chan string
	thaw    chan struct{}
}

func newFreezing(t *testing.T) *freezing {
	f := &freezing{Service: localJobs(t), started: make(chan string, 1), thaw: make(chan struct{})}
	t.Cleanup(func() { close(f.thaw) })
	return f
}

func (f *freezing) SubmitAt(ctx context.Context, w *workflow.Workflow, id slot.ID, started time.Time) (string, error) {
	ext, err := f.Service.SubmitAt(ctx, w, id, started)
	f.started <- ext
	<-f.thaw
	return ext, err
}

// TestJobRecordedBeforeItStarts: an instance that froze right after its
// host started a command job, before anything else happened, leaves a row
// naming the job, so the instance that takes the workflow over finds it
// (Recover) instead of starting the slot a second time, and declares it
// lost only after the grace.
func TestJobRecordedBeforeItStarts(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	b := member(t, pool, "b", time.Minute)
	la := newFreezing(t)
	ja, jb := NewJobs(a, la, JobsOptions{}), NewJobs(b, localJobs(t), JobsOptions{})
	w := cmdWorkflow("sleep", "300")
	intent := time.Now().Add(-time.Second) // the engine's submit intent, written before Submit
	go ja.Submit(ctxT(t), w, cmdSlot)
	var ext string
	select {
	case ext = <-la.started:
	case <-time.After(time.Minute):
		t.Fatal("a's host did not start the job within a minute")
	}
	t.Cleanup(func() { la.Service.Kill(context.Background(), w, ext) })
	if st, err := la.Service.Status(ctxT(t), w, ext); err != nil || !st.Running {
		t.Fatalf("the process on a's host: %+v %v, want running", st, err)
	}
	got, found, err := jb.Recover(ctxT(t), w, cmdSlot, intent)
	if err != nil || !found || got != ext {
		t.Fatalf("b's Recover of the slot a's frozen instance started: %q found=%v err=%v, want %q: the slot would run twice", got, found, err, ext)
	}
	if st, err := jb.Status(ctxT(t), w, ext); err != nil || !st.Running || !strings.Contains(st.Detail, "instance a") {
		t.Fatalf("b's view of the job: %+v %v, want running on instance a", st, err)
	}
}

// dying is a host whose instance dies after recording a job's row and
// before its command service starts the job: SubmitAt reports the ID it
// was asked for on asked and then blocks until thaw is closed, starting
// nothing.
type dying struct {
	*command.Service
	asked chan string
	thaw  chan struct{}
}

func (d *dying) SubmitAt(ctx context.Context, w *workflow.Workflow, id slot.ID, started time.Time) (string, error) {
	d.asked <- command.JobID(id, started)
	<-d.thaw
	return "", context.Canceled
}

// TestJobRecordedButNeverStarted: an instance died between recording a
// job and starting it. Until the instance is back, the others see the job
// as running on it (they cannot know it never started). Back, with a fresh
// process, the instance publishes the job as never started and its
// Recover withdraws the row, so the slot is submitted again; nothing ran.
func TestJobRecordedButNeverStarted(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	b := member(t, pool, "b", time.Minute)
	host := localJobs(t)
	d := &dying{Service: host, asked: make(chan string, 1), thaw: make(chan struct{})}
	t.Cleanup(func() { close(d.thaw) })
	ja, jb := NewJobs(a, d, JobsOptions{}), NewJobs(b, localJobs(t), JobsOptions{})
	w := cmdWorkflow("sleep", "300")
	intent := time.Now().Add(-time.Second)
	go ja.Submit(ctxT(t), w, cmdSlot)
	var ext string
	select {
	case ext = <-d.asked:
	case <-time.After(time.Minute):
		t.Fatal("a did not get as far as starting the job within a minute")
	}
	if got, found, err := jb.Recover(ctxT(t), w, cmdSlot, intent); err != nil || !found || got != ext {
		t.Fatalf("b's Recover while a is away: %q %v %v, want a's recorded job %q", got, found, err, ext)
	}
	if st, err := jb.Status(ctxT(t), w, ext); err != nil || !st.Running {
		t.Fatalf("b's view while a beats: %+v %v, want running", st, err)
	}
	// a's process restarts (same instance, same host, fresh memory).
	ja2 := NewJobs(a, host, JobsOptions{})
	if err := ja2.Publish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st, err := jb.Status(ctxT(t), w, ext)
	if err != nil || st.Running || st.Success || !st.NeverStarted || !strings.HasPrefix(st.Detail, "never started") {
		t.Fatalf("b's view once a is back: %+v %v, want never started (the engine submits the slot again)", st, err)
	}
	for name, j := range map[string]*Jobs{"a": ja2, "b": jb} {
		if got, found, err := j.Recover(ctxT(t), w, cmdSlot, intent); err != nil || found {
			t.Fatalf("%s's Recover once a is back: %q %v %v, want none (the slot is submitted again)", name, got, found, err)
		}
	}
	if _, err := host.Status(ctxT(t), w, ext); !errors.Is(err, command.ErrNoJob) {
		t.Fatalf("a's host has a job %s: %v, want none ever started", ext, err)
	}
}

// TestPublishLeavesAJobBeingStarted: while this instance starts a job (its
// row written, its directory created, job.json not yet), a Publish must
// not take the half-made job for one that never started: the instance
// that then holds the workflow would submit the slot again while the job
// runs. (Seen in TestClusterKill9OwnerCommand under load: a job published
// "never started: celos stopped while creating the job" as it started.)
func TestPublishLeavesAJobBeingStarted(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	b := member(t, pool, "b", time.Minute)
	dir := t.TempDir()
	host, err := command.New(dir, command.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := &halfway{Service: host, dir: dir, asked: make(chan string, 1), thaw: make(chan struct{})}
	t.Cleanup(func() { close(h.thaw) })
	ja, jb := NewJobs(a, h, JobsOptions{}), NewJobs(b, localJobs(t), JobsOptions{})
	w := cmdWorkflow("true")
	go ja.Submit(ctxT(t), w, cmdSlot)
	var ext string
	select {
	case ext = <-h.asked:
	case <-time.After(time.Minute):
		t.Fatal("a did not get as far as creating the job within a minute")
	}
	if err := ja.Publish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if st, err := jb.Status(ctxT(t), w, ext); err != nil || !st.Running || st.NeverStarted {
		t.Fatalf("b's view of a job a is starting, after a's Publish: %+v %v, want running", st, err)
	}
	if st, err := ja.Status(ctxT(t), w, ext); err != nil || !st.Running {
		t.Fatalf("a's view of the job it is starting: %+v %v, want running", st, err)
	}
}

// halfway is a host whose command service is caught creating a job: its
// directory exists, nothing in it yet. SubmitAt reports the job's ID on
// asked and blocks until thaw is closed.
type halfway struct {
	*command.Service
	dir   string
	asked chan string
	thaw  chan struct{}
}

func (h *halfway) SubmitAt(ctx context.Context, w *workflow.Workflow, id slot.ID, started time.Time) (string, error) {
	ext := command.JobID(id, started)
	_, name, _ := strings.Cut(ext, "@")
	if err := os.MkdirAll(filepath.Join(h.dir, id.Workflow, name), 0o755); err != nil {
		return "", err
	}
	h.asked <- ext
	<-h.thaw
	return "", context.Canceled
}
