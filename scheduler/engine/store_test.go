package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// statedb.DB is a Store and keeps the registers.
var (
	_ Store     = (*statedb.DB)(nil)
	_ Registers = (*statedb.DB)(nil)
)

// memStore is a Store in memory: the proof that the engine runs on
// something other than statedb. It keeps no registers.
type memStore struct {
	mu      sync.Mutex
	states  map[slot.ID]slot.State
	marks   map[slot.ID]time.Time
	intents map[slot.ID]store.Intent
	paused  map[string]bool
	owners  map[string]store.Owner
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{states: map[slot.ID]slot.State{}, marks: map[slot.ID]time.Time{},
		intents: map[slot.ID]store.Intent{}, paused: map[string]bool{}, owners: map[string]store.Owner{}}
}

// norm makes a slot ID a map key (UTC, millisecond precision as stored).
func norm(id slot.ID) slot.ID {
	return slot.ID{Workflow: id.Workflow, Time: time.UnixMilli(id.Time.UnixMilli()).UTC()}
}

func (m *memStore) Get(id slot.ID) (slot.State, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[norm(id)]
	return st, ok, nil
}

func (m *memStore) Active(wf string) ([]slot.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []slot.State
	for id, st := range m.states {
		if id.Workflow == wf && !st.Status.Final() {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID.Time.Before(out[j].ID.Time) })
	return out, nil
}

func (m *memStore) Count(wf string) (map[slot.Status]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[slot.Status]int)
	for id, st := range m.states {
		if id.Workflow == wf {
			out[st.Status]++
		}
	}
	return out, nil
}

func (m *memStore) Put(st slot.State) error {
	if !st.Status.Valid() {
		return fmt.Errorf("put %s: invalid status %q", st.ID, st.Status)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st.ID = norm(st.ID)
	m.states[st.ID] = st
	return nil
}

func (m *memStore) PutStates(sts []slot.State) map[slot.ID]error {
	var failed map[slot.ID]error
	for _, st := range sts {
		if err := m.Put(st); err != nil {
			if failed == nil {
				failed = make(map[slot.ID]error)
			}
			failed[st.ID] = err
		}
	}
	return failed
}

func (m *memStore) RerunMarks(wf string) ([]store.RerunMark, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.RerunMark
	for id, at := range m.marks {
		if id.Workflow == wf {
			out = append(out, store.RerunMark{Slot: id.Time, At: at})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot.Before(out[j].Slot) })
	return out, nil
}

func (m *memStore) MarkRerun(id slot.ID, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marks[norm(id)] = at.UTC()
	return nil
}

func (m *memStore) UnmarkRerun(id slot.ID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.marks, norm(id))
	return nil
}

func (m *memStore) GetIntent(id slot.ID) (store.Intent, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.intents[norm(id)]
	return in, ok, nil
}

func (m *memStore) PutIntents(ins map[slot.ID]store.Intent) map[slot.ID]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, in := range ins {
		m.intents[norm(id)] = in
	}
	return nil
}

func (m *memStore) DeleteIntent(id slot.ID) error { return m.DeleteIntents([]slot.ID{id}) }

func (m *memStore) DeleteIntents(ids []slot.ID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.intents, norm(id))
	}
	return nil
}

func (m *memStore) Paused(wf string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused[wf]
}

func (m *memStore) SetPaused(wf string, paused bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused[wf] = paused
	return nil
}

func (m *memStore) Owners() (map[string]store.Owner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]store.Owner, len(m.owners))
	for k, v := range m.owners {
		out[k] = v
	}
	return out, nil
}

func (m *memStore) SetOwner(wf string, o store.Owner) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owners[wf] = o
	return nil
}

func (m *memStore) DeleteOwner(wf string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.owners, wf)
	return nil
}

// TestEngineOnAnotherStore runs the same life of two workflows (a success
// trigger between them, a retry, a rerun, a kill, a pause) on the state
// database and on memStore, and expects the same slots after every step.
func TestEngineOnAnotherStore(t *testing.T) {
	db, err := statedb.OpenWith(t.TempDir(), statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	onDisk := storeLife(t, db)
	inMemory := storeLife(t, newMemStore())
	if d := cmp.Diff(onDisk, inMemory); d != "" {
		t.Fatalf("the engine behaves differently on memStore (-statedb +memStore):\n%s", d)
	}
	if testing.Verbose() {
		t.Log("\n" + strings.Join(onDisk, "\n"))
	}
	if len(onDisk) < 10 {
		t.Fatalf("too short a life: %v", onDisk)
	}
}

// storeLife drives an engine over store and returns the slots of both
// workflows (Slots, as the API serves them) after every operation.
func storeLife(t *testing.T, store Store) []string {
	t.Helper()
	ctx := context.Background()
	start := ts("2024-01-01T00:00Z")
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = start, start
	a.MaxRetryCount = 1
	b.Trigger = workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: "a"}
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "p", a, b)
	svc := newFake()
	e, err := New(Options{WorkflowsDir: wdir, Store: store, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	now := ts("2024-01-01T02:30Z")
	var trace []string
	snap := func(what string) {
		t.Helper()
		line := what + ":"
		for _, wf := range []string{"a", "b"} {
			sts, err := e.Slots(ctx, wf, start, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range sts {
				line += fmt.Sprintf(" %s@%s=%s/%d", wf, st.ID.Time.Format("15"), st.Status, st.RetryCount)
			}
		}
		trace = append(trace, line)
	}
	step := func() {
		t.Helper()
		if err := e.Step(ctx, now, nil); err != nil {
			t.Fatal(err)
		}
		snap("step")
	}
	a0 := slot.ID{Workflow: "a", Time: start}
	for range 3 {
		step()
	}
	svc.finish(a0, false) // retried
	step()
	step()
	for range 8 {
		svc.finishAll(true)
		step()
	}
	if err := e.Rerun(ctx, a0, now); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(trace, "\n"))
	}
	snap("rerun a@00")
	if err := e.SetPaused(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	step()
	step()
	if err := e.Kill(ctx, a0); err != nil {
		t.Fatal(err)
	}
	snap("kill a@00")
	if err := e.SetPaused(ctx, "b", false); err != nil {
		t.Fatal(err)
	}
	svc.finishAll(true)
	step()
	step()
	counts := e.StatusCounts()
	trace = append(trace, fmt.Sprint("counts: ", counts))
	if _, ok := store.(*memStore); ok {
		if _, err := e.GetRegister(ctx, "b", "k"); !errors.Is(err, errNoRegisters) {
			t.Fatalf("a register of a store that keeps none: %v", err)
		}
	}
	return trace
}
