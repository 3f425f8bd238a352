package api

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// fakeService is a small in-memory Service: every workflow is hourly, a
// step marks the slots of the step's hour SUCCESS. It lets the handler tests
// pin the HTTP contract independently of the engine; engine_test.go runs
// the same requests against the real engine.
type fakeService struct {
	mu        sync.Mutex
	workflows map[string]*workflow.Workflow
	states    map[slot.ID]slot.State
	paused    map[string]bool
	registers map[string]map[string]json.RawMessage
	loadErrs  []scheduler.LoadError
	steps     []time.Time
	stepErr   error
	// orphans are workflows whose dependent schedule names a missing one.
	orphans map[string]bool
}

func newFake(ids ...string) *fakeService {
	f := &fakeService{
		workflows: map[string]*workflow.Workflow{},
		states:    map[slot.ID]slot.State{},
		paused:    map[string]bool{},
		registers: map[string]map[string]json.RawMessage{},
	}
	for _, id := range ids {
		w := fixture.Hourly(id)
		f.workflows[id] = &w
	}
	return f
}

func (f *fakeService) wf(id string) (*workflow.Workflow, error) {
	w, ok := f.workflows[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id)
	}
	return w, nil
}

func (f *fakeService) Step(_ context.Context, now time.Time, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stepErr != nil {
		return f.stepErr
	}
	f.steps = append(f.steps, now)
	for id := range f.workflows {
		if len(ids) > 0 && !contains(ids, id) || f.paused[id] {
			continue
		}
		t := now.Truncate(time.Hour)
		sid := slot.ID{Workflow: id, Time: t}
		if _, ok := f.states[sid]; !ok {
			f.states[sid] = slot.State{ID: sid, Status: slot.Success, ExternalID: "job-" + t.Format("15")}
		}
	}
	return nil
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

func (f *fakeService) WorkflowIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.workflows))
	for id := range f.workflows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (f *fakeService) Workflow(id string) (*workflow.Workflow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wf(id)
}

func (f *fakeService) LoadErrors() []scheduler.LoadError {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadErrs
}

func (f *fakeService) Slots(_ context.Context, id string, start, end time.Time) ([]scheduler.ListedSlot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.wf(id); err != nil {
		return nil, err
	}
	if f.orphans[id] {
		return nil, fmt.Errorf("%w: dependent schedule: workflow \"gone\" not found", scheduler.ErrUnschedulable)
	}
	var out []slot.State
	t := start.Truncate(time.Hour)
	if t.Before(start) {
		t = t.Add(time.Hour)
	}
	for ; t.Before(end); t = t.Add(time.Hour) {
		sid := slot.ID{Workflow: id, Time: t}
		st, ok := f.states[sid]
		if !ok {
			st = slot.NewWaiting(sid)
		}
		out = append(out, st)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return asListed(out), nil
}

func (f *fakeService) SlotState(_ context.Context, id slot.ID) (slot.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[id]
	if !ok {
		return slot.State{}, fmt.Errorf("%w: %s", slot.ErrSlotNotFound, id)
	}
	return st, nil
}

func (f *fakeService) Paused(id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.wf(id); err != nil {
		return false, err
	}
	return f.paused[id], nil
}

func (f *fakeService) SetPaused(_ context.Context, id string, paused bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.wf(id); err != nil {
		return err
	}
	f.paused[id] = paused
	return nil
}

func (f *fakeService) TriggerStatus(_ context.Context, id slot.ID, now time.Time) (trigger.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.wf(id.Workflow); err != nil {
		return trigger.Status{}, err
	}
	return trigger.Status{Type: "AndTrigger", Ready: false, Description: "Not all nested triggers are ready",
		SubStatuses: []trigger.Status{
			{Type: "DelayTrigger", Description: "Delayed until " + slot.FormatTime(id.Time.Add(time.Hour))},
			{Type: "AlwaysTrigger", Ready: true, Description: "Always ready"},
		}}, nil
}

func (f *fakeService) inSchedule(id slot.ID) error {
	if _, err := f.wf(id.Workflow); err != nil {
		return err
	}
	if !id.Time.Truncate(time.Hour).Equal(id.Time) {
		return fmt.Errorf("%w: %s", slot.ErrNotInSchedule, id)
	}
	return nil
}

func (f *fakeService) Rerun(_ context.Context, id slot.ID, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.inSchedule(id); err != nil {
		return err
	}
	if st, ok := f.states[id]; ok {
		if !st.Status.Final() {
			return fmt.Errorf("%w: %s is %s", slot.ErrIllegalTransition, id, st.Status)
		}
		f.states[id] = slot.NewWaiting(id)
	}
	return nil
}

// CheckRerun is Rerun's check without the change (RerunChecker).
func (f *fakeService) CheckRerun(_ context.Context, id slot.ID, _ time.Time) (slot.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.inSchedule(id); err != nil {
		return slot.State{}, err
	}
	st, ok := f.states[id]
	if !ok {
		return slot.NewWaiting(id), nil
	}
	if !st.Status.Final() {
		return slot.State{}, fmt.Errorf("%w: %s is %s", slot.ErrIllegalTransition, id, st.Status)
	}
	return st, nil
}

func (f *fakeService) Kill(_ context.Context, id slot.ID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.inSchedule(id); err != nil {
		return err
	}
	st, ok := f.states[id]
	if ok && st.Status.Final() {
		return fmt.Errorf("%w: %s is %s", slot.ErrIllegalTransition, id, st.Status)
	}
	f.states[id] = slot.State{ID: id, Status: slot.Killed, ExternalID: st.ExternalID}
	return nil
}

func checkName(kind, s string) error {
	if s == "" || strings.ContainsAny(s, "/.") {
		return fmt.Errorf("%w: %s %q", slot.ErrBadParameter, kind, s)
	}
	return nil
}

func (f *fakeService) GetRegister(_ context.Context, bucket, key string) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkName("bucket", bucket); err != nil {
		return nil, err
	}
	v, ok := f.registers[bucket][key]
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s", scheduler.ErrRegisterNotFound, bucket, key)
	}
	return v, nil
}

func (f *fakeService) PutRegister(_ context.Context, bucket, key string, value json.RawMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkName("bucket", bucket); err != nil {
		return err
	}
	if err := checkName("key", key); err != nil {
		return err
	}
	if f.registers[bucket] == nil {
		f.registers[bucket] = map[string]json.RawMessage{}
	}
	f.registers[bucket][key] = value
	return nil
}

func (f *fakeService) DeleteRegister(_ context.Context, bucket, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.registers[bucket], key)
	return nil
}

func (f *fakeService) DeleteRegistersWithPrefix(_ context.Context, bucket, prefix string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.registers[bucket] {
		if strings.HasPrefix(k, prefix) {
			delete(f.registers[bucket], k)
		}
	}
	return nil
}

func (f *fakeService) RegisterKeys(_ context.Context, bucket, prefix string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for k := range f.registers[bucket] {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func (f *fakeService) ClearCache() error { return nil }

// asListed makes states a listing of Service.Slots (none unreadable).
func asListed(states []slot.State) []scheduler.ListedSlot {
	out := make([]scheduler.ListedSlot, len(states))
	for i, st := range states {
		out[i].State = st
	}
	return out
}
