package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/schedule"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// fakeService is an in-memory external service. Jobs finish when the test
// says so.
type fakeService struct {
	mu        sync.Mutex
	n         int
	jobs      map[string]*fakeJob
	submitErr error
	statusErr error
	killErr   error
	submits   []slot.ID
	kills     []string
	recover   bool // implement Recover (see recoverer)
}

type fakeJob struct {
	id       slot.ID
	status   external.Status
	created  time.Time
	statuses int
}

func newFake() *fakeService { return &fakeService{jobs: make(map[string]*fakeJob)} }

func (f *fakeService) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitErr != nil {
		return "", f.submitErr
	}
	f.n++
	ext := fmt.Sprintf("job-%d", f.n)
	f.jobs[ext] = &fakeJob{id: id, status: external.Status{Running: true}, created: time.Now()}
	f.submits = append(f.submits, id)
	return ext, nil
}

func (f *fakeService) Status(ctx context.Context, w *workflow.Workflow, ext string) (external.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.statusErr != nil {
		return external.Status{}, f.statusErr
	}
	j := f.jobs[ext]
	if j == nil {
		return external.Status{}, fmt.Errorf("no job %s", ext)
	}
	j.statuses++
	return j.status, nil
}

func (f *fakeService) Kill(ctx context.Context, w *workflow.Workflow, ext string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killErr != nil {
		return f.killErr
	}
	f.kills = append(f.kills, ext)
	if j := f.jobs[ext]; j != nil {
		j.status = external.Status{Detail: "KILLED"}
	}
	return nil
}

// finish ends every running job of the slot with the given verdict.
func (f *fakeService) finish(id slot.ID, success bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.id == id && j.status.Running {
			j.status = external.Status{Success: success}
		}
	}
}

func (f *fakeService) finishAll(success bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.status.Running {
			j.status = external.Status{Success: success}
		}
	}
}

func (f *fakeService) submitted() []slot.ID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slot.ID(nil), f.submits...)
}

// recoverer is a fakeService that can find its jobs.
type recoverer struct{ *fakeService }

func (r recoverer) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ext, j := range r.jobs {
		if j.id == id && !j.created.Before(since) {
			return ext, true, nil
		}
	}
	return "", false, nil
}

// tlike is what test helpers need from *testing.T or a rapid check.
type tlike interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// syncedRig makes rigs fsync like a server does (one test keeps it on).
var syncedRig = false

type rig struct {
	t    tlike
	wdir string
	ddir string
	db   rigDB
	svc  *fakeService
	e    *Engine
}

// rigDB is the store of a rig: statedb.DB, or another store that the
// tests run the same checks on (see TestEnginePropertiesOnPostgres).
type rigDB interface {
	Store
	Range(wf string, start, end time.Time) ([]slot.State, error)
	PutIntent(id slot.ID, in store.Intent) error
	Close() error
}

// openRigDB opens a rig's store in dir: the file store, unless a test
// sets it to another.
var openRigDB = func(t tlike, dir string) (rigDB, error) {
	return statedb.OpenWith(dir, statedb.Options{NoSync: !syncedRig})
}

func newRig(t tlike, svc external.Service, ws ...workflow.Workflow) *rig {
	t.Helper()
	r := &rig{t: t, wdir: t.TempDir(), ddir: t.TempDir()}
	if len(ws) > 0 {
		fixture.WriteProject(t, r.wdir, "p", ws...)
	}
	var err error
	r.db, err = openRigDB(t, r.ddir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.db.Close() })
	if svc == nil {
		r.svc = newFake()
		svc = r.svc
	} else if f, ok := svc.(*fakeService); ok {
		r.svc = f
	} else if rc, ok := svc.(recoverer); ok {
		r.svc = rc.fakeService
	}
	r.e, err = New(Options{WorkflowsDir: r.wdir, Store: r.db, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) step(now time.Time) StepReport {
	r.t.Helper()
	if err := r.e.Step(context.Background(), now, nil); err != nil {
		r.t.Fatal(err)
	}
	return r.e.LastStep()
}

func (r *rig) state(wf string, t time.Time) slot.State {
	r.t.Helper()
	st, found, err := r.db.Get(slot.ID{Workflow: wf, Time: t})
	if err != nil {
		r.t.Fatal(err)
	}
	if !found {
		return slot.NewWaiting(slot.ID{Workflow: wf, Time: t})
	}
	return st
}

func ts(s string) time.Time {
	t, err := slot.ParseTime(s)
	if err != nil {
		panic(err)
	}
	return t
}

func intentAt(t time.Time) store.Intent { return store.Intent{Time: t} }

func newCron(expr string) (*schedule.Schedule, error) { return schedule.NewCron(expr, "UTC") }
