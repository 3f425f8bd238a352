package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// memService is a small in-memory scheduler.Service: workflows with a fixed
// period (slots at multiples of it since the epoch), stored states, pause
// flags. Missing states are synthesized as WAITING, as the engine does.
type memService struct {
	mu         sync.Mutex
	wfs        map[string]*workflow.Workflow
	period     map[string]time.Duration
	states     map[string]map[int64]slot.State // by workflow, then Unix seconds
	paused     map[string]bool
	loadErrors []scheduler.LoadError
	trig       map[string]trigger.Status
	slotsErr   map[string]error
	kept       []scheduler.Problem
}

// Problems is the engine's optional problem list.
func (m *memService) Problems(wf string) []scheduler.Problem {
	var out []scheduler.Problem
	for _, p := range m.kept {
		if wf == "" || p.Workflow == wf {
			out = append(out, p)
		}
	}
	return out
}

func newMem() *memService {
	return &memService{
		wfs:      map[string]*workflow.Workflow{},
		period:   map[string]time.Duration{},
		states:   map[string]map[int64]slot.State{},
		paused:   map[string]bool{},
		trig:     map[string]trigger.Status{},
		slotsErr: map[string]error{},
	}
}

// add registers a workflow with slots every period.
func (m *memService) add(id string, period time.Duration, service string) *workflow.Workflow {
	cron := "0 0 * * * ?"
	if period >= 24*time.Hour {
		cron = "0 0 0 * * ?"
	}
	if period < time.Hour {
		cron = fmt.Sprintf("0 0/%d * * * ?", int(period/time.Minute))
	}
	w := fixture.Hourly(id)
	w.Schedule.Cron = cron
	w.Trigger = workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{{Type: workflow.TriggerHDFSCheck, Path: "/input/${year}/${month}/${day}/${hour}/_READY", FS: "file:///"}, {Type: workflow.TriggerDelay, Seconds: 600}}}
	w.ExternalService = workflow.ExternalService{Type: service}
	if service == workflow.ServiceCommand {
		w.ExternalService = fixture.Command("sh", "-c", "echo ${year}-${month}-${day}")
	}
	w.MaxRetryCount = 2
	w.WaitTimeoutSeconds = 86400
	m.wfs[id] = &w
	m.period[id] = period
	m.states[id] = map[int64]slot.State{}
	return &w
}

func (m *memService) set(id string, t time.Time, st slot.Status, ext string, retry int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[id][t.Unix()] = slot.State{ID: slot.ID{Workflow: id, Time: t.UTC()}, Status: st, ExternalID: ext, RetryCount: retry}
}

func (m *memService) Step(ctx context.Context, now time.Time, ids []string) error { return nil }

func (m *memService) WorkflowIDs() []string {
	ids := make([]string, 0, len(m.wfs))
	for id := range m.wfs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (m *memService) Workflow(id string) (*workflow.Workflow, error) {
	w, ok := m.wfs[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id)
	}
	return w, nil
}

func (m *memService) LoadErrors() []scheduler.LoadError { return m.loadErrors }

func (m *memService) Slots(ctx context.Context, id string, start, end time.Time) ([]scheduler.ListedSlot, error) {
	p, ok := m.period[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id)
	}
	if err := m.slotsErr[id]; err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := int64(p / time.Second)
	// Newest first: from the last slot before end down to start.
	last := end.Unix() - 1
	last -= ((last % ps) + ps) % ps
	states := m.states[id]
	out := make([]slot.State, 0, int((end.Sub(start))/p)+1)
	for t := last; t >= start.Unix(); t -= ps {
		if st, ok := states[t]; ok {
			out = append(out, st)
			continue
		}
		out = append(out, slot.NewWaiting(slot.ID{Workflow: id, Time: time.Unix(t, 0).UTC()}))
	}
	return asListed(out), nil
}

func (m *memService) inSchedule(id slot.ID) error {
	p, ok := m.period[id.Workflow]
	if !ok {
		return fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id.Workflow)
	}
	if id.Time.Unix()%int64(p/time.Second) != 0 || id.Time.Nanosecond() != 0 {
		return fmt.Errorf("%w: %s", slot.ErrNotInSchedule, id)
	}
	return nil
}

func (m *memService) SlotState(ctx context.Context, id slot.ID) (slot.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[id.Workflow][id.Time.Unix()]
	if !ok {
		return slot.State{}, fmt.Errorf("%w: %s", slot.ErrSlotNotFound, id)
	}
	return st, nil
}

func (m *memService) Paused(id string) (bool, error) {
	if _, ok := m.wfs[id]; !ok {
		return false, fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused[id], nil
}

func (m *memService) SetPaused(ctx context.Context, id string, paused bool) error {
	if _, ok := m.wfs[id]; !ok {
		return fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused[id] = paused
	return nil
}

func (m *memService) TriggerStatus(ctx context.Context, id slot.ID, now time.Time) (trigger.Status, error) {
	if err := m.inSchedule(id); err != nil {
		return trigger.Status{}, err
	}
	if ts, ok := m.trig[id.Workflow]; ok {
		return ts, nil
	}
	path := fmt.Sprintf("file:///input/%s/_READY", id.Time.UTC().Format("2006/01/02/15"))
	return trigger.Status{Type: "AndTrigger", Ready: false, Description: "Not all nested triggers are ready", SubStatuses: []trigger.Status{
		{Type: "HDFSCheckTrigger", Ready: false, Description: "HDFS path " + path + " is not ready", SubStatuses: []trigger.Status{}},
		{Type: "DelayTrigger", Ready: true, Description: "Ready since " + slot.FormatTime(id.Time.Add(10*time.Minute)), SubStatuses: []trigger.Status{}},
	}}, nil
}

func (m *memService) Rerun(ctx context.Context, id slot.ID, now time.Time) error {
	if err := m.inSchedule(id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := m.states[id.Workflow][id.Time.Unix()]; ok && !st.Status.Final() {
		return fmt.Errorf("%w: %s is %s", slot.ErrIllegalTransition, id, st.Status)
	}
	m.states[id.Workflow][id.Time.Unix()] = slot.State{ID: id, Status: slot.Waiting}
	return nil
}

func (m *memService) Kill(ctx context.Context, id slot.ID) error {
	if err := m.inSchedule(id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[id.Workflow][id.Time.Unix()]
	if ok && st.Status.Final() {
		return fmt.Errorf("%w: %s is %s", slot.ErrIllegalTransition, id, st.Status)
	}
	st.ID, st.Status = id, slot.Killed
	m.states[id.Workflow][id.Time.Unix()] = st
	return nil
}

func (m *memService) GetRegister(ctx context.Context, bucket, key string) (json.RawMessage, error) {
	return nil, slot.ErrSlotNotFound
}
func (m *memService) PutRegister(ctx context.Context, bucket, key string, value json.RawMessage) error {
	return nil
}
func (m *memService) DeleteRegister(ctx context.Context, bucket, key string) error { return nil }
func (m *memService) DeleteRegistersWithPrefix(ctx context.Context, bucket, prefix string) error {
	return nil
}
func (m *memService) RegisterKeys(ctx context.Context, bucket, prefix string) ([]string, error) {
	return nil, nil
}
func (m *memService) ClearCache() error { return nil }

var _ scheduler.Service = (*memService)(nil)

func api_LoadError(file, err string) scheduler.LoadError {
	return scheduler.LoadError{File: file, Error: err}
}

// asListed makes states a listing of Service.Slots (none unreadable).
func asListed(states []slot.State) []scheduler.ListedSlot {
	out := make([]scheduler.ListedSlot, len(states))
	for i, st := range states {
		out[i].State = st
	}
	return out
}
