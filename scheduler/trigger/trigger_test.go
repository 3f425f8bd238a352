package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

type states map[slot.ID]slot.State

func (s states) Get(id slot.ID) (slot.State, bool, error) {
	if id.Workflow == "broken" {
		return slot.State{}, false, errors.New("corrupt state file")
	}
	st, ok := s[id]
	return st, ok, nil
}

type fakeFS struct {
	exists map[string]bool
	err    error
	calls  atomic.Int64
}

func (f *fakeFS) Exists(ctx context.Context, fsURI, path string) (bool, error) {
	f.calls.Add(1)
	if f.err != nil {
		return false, f.err
	}
	return f.exists[fsURI+path], nil
}

var slotTime = time.Date(2014, 1, 1, 5, 0, 0, 0, time.UTC)

func TestDescriptionsAndTypes(t *testing.T) {
	sts := states{
		{Workflow: "up", Time: slotTime}:                     {Status: slot.Success},
		{Workflow: "up", Time: slotTime.Add(-time.Hour)}:     {Status: slot.Failure},
		{Workflow: "up", Time: slotTime.Add(-2 * time.Hour)}: {Status: slot.Success},
	}
	fs := &fakeFS{exists: map[string]bool{"hdfs://nn/in/2014/01/01/05/_READY": true}}
	env := Env{States: sts, FS: fs}
	now := slotTime.Add(30 * time.Minute)
	hdfs := func(p string) workflow.Trigger {
		return workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: p, FS: "hdfs://nn"}
	}
	succ := func(wf string) workflow.Trigger { return workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: wf} }
	tests := []struct {
		trig        workflow.Trigger
		typ, desc   string
		ready       bool
		errContains string
	}{
		{workflow.Trigger{Type: workflow.TriggerAlways}, "AlwaysTrigger", "Always ready", true, ""},
		{hdfs("/in/${year}/${month}/${day}/${hour}/_READY"), "HDFSCheckTrigger", "HDFS path /in/2014/01/01/05/_READY is ready", true, ""},
		{hdfs("/in/${year}/${minute}${second}${millisecond}"), "HDFSCheckTrigger", "HDFS path /in/2014/0000000 is not ready", false, ""},
		{succ("up"), "SuccessTrigger", "Workflow slot up@2014-01-01T05:00:00.000Z is ready", true, ""},
		{succ("down"), "SuccessTrigger", "Workflow slot down@2014-01-01T05:00:00.000Z is not ready", false, ""},
		{succ("broken"), "SuccessTrigger", "Workflow slot broken@2014-01-01T05:00:00.000Z is not ready", false, "corrupt"},
		{workflow.Trigger{Type: workflow.TriggerAnd}, "AndTrigger", "All nested triggers are ready", true, ""},
		{workflow.Trigger{Type: workflow.TriggerOr}, "OrTrigger", "None of the nested triggers are ready", false, ""},
		{workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{succ("up"), succ("down")}}, "AndTrigger", "Not all nested triggers are ready", false, ""},
		{workflow.Trigger{Type: workflow.TriggerOr, Triggers: []workflow.Trigger{succ("up"), succ("down")}}, "OrTrigger", "One or more nested triggers are ready", true, ""},
		{workflow.Trigger{Type: workflow.TriggerNot, Trigger: &workflow.Trigger{Type: workflow.TriggerAlways}}, "NotTrigger", "Not ready, nested trigger is ready", false, ""},
		{workflow.Trigger{Type: workflow.TriggerNot, Trigger: ptr(succ("down"))}, "NotTrigger", "Ready, nested trigger isn't ready", true, ""},
		{workflow.Trigger{Type: workflow.TriggerOffset, Seconds: -3600, Trigger: ptr(succ("up"))}, "OffsetTrigger", "Nested trigger offset by -3600 seconds not ready", false, ""},
		{workflow.Trigger{Type: workflow.TriggerOffset, Seconds: -7200, Trigger: ptr(succ("up"))}, "OffsetTrigger", "Nested trigger offset by -7200 seconds ready", true, ""},
		{workflow.Trigger{Type: workflow.TriggerDelay, Seconds: 1800}, "DelayTrigger", "Delayed until 2014-01-01T05:30:00.000Z", false, ""},
		{workflow.Trigger{Type: workflow.TriggerDelay, Seconds: 1799}, "DelayTrigger", "Ready since 2014-01-01T05:29:59.000Z", true, ""},
		// Errors: never ready, and never turned into ready by not/or.
		{workflow.Trigger{Type: workflow.TriggerNot, Trigger: ptr(succ("broken"))}, "NotTrigger", "Not ready, nested trigger could not be evaluated", false, "corrupt"},
		{workflow.Trigger{Type: workflow.TriggerOr, Triggers: []workflow.Trigger{succ("broken"), succ("up")}}, "OrTrigger", "One or more nested triggers are ready", true, ""},
		{workflow.Trigger{Type: workflow.TriggerOr, Triggers: []workflow.Trigger{succ("broken"), succ("down")}}, "OrTrigger", "None of the nested triggers are ready", false, "corrupt"},
		{workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{succ("broken"), succ("down")}}, "AndTrigger", "Not all nested triggers are ready", false, ""},
		{workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{succ("broken"), succ("up")}}, "AndTrigger", "Not all nested triggers are ready", false, "corrupt"},
	}
	for _, tc := range tests {
		st := Evaluate(context.Background(), env, &tc.trig, slotTime, now)
		if st.Type != tc.typ || st.Description != tc.desc || st.Ready != tc.ready {
			t.Errorf("%+v:\n got %s %q ready=%v\nwant %s %q ready=%v", tc.trig, st.Type, st.Description, st.Ready, tc.typ, tc.desc, tc.ready)
		}
		if (tc.errContains == "") != (st.Error == "") || !strings.Contains(st.Error, tc.errContains) {
			t.Errorf("%+v: error %q, want %q", tc.trig, st.Error, tc.errContains)
		}
		if st.SubStatuses == nil {
			t.Errorf("%+v: nil subStatuses (JSON null)", tc.trig)
		}
	}
}

func ptr(t workflow.Trigger) *workflow.Trigger { return &t }

func TestStatusJSON(t *testing.T) {
	tr := workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{{Type: workflow.TriggerAlways}}}
	st := Evaluate(context.Background(), Env{}, &tr, slotTime, slotTime)
	b, _ := json.Marshal(st)
	want := `{"type":"AndTrigger","ready":true,"description":"All nested triggers are ready","subStatuses":[{"type":"AlwaysTrigger","ready":true,"description":"Always ready","subStatuses":[]}]}`
	if string(b) != want {
		t.Fatalf("%s\nwant %s", b, want)
	}
}

func TestFSErrorIsNotReadyWithError(t *testing.T) {
	fs := &fakeFS{err: errors.New("connection refused")}
	tr := workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: "/x", FS: "hdfs://nn"}
	ok, err := Ready(context.Background(), Env{FS: fs}, &tr, slotTime, slotTime)
	if ok || err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("%v %v", ok, err)
	}
	ok, err = Ready(context.Background(), Env{}, &tr, slotTime, slotTime)
	if ok || err == nil {
		t.Fatalf("no FS: %v %v", ok, err)
	}
}

func TestLocalAndMux(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "2014-01-01", "05"), 0o755)
	os.WriteFile(filepath.Join(dir, "2014-01-01", "05", "_READY"), nil, 0o644)
	m := NewMux("")
	ctx := context.Background()
	for _, tc := range []struct {
		fs, path string
		want     bool
		err      string
	}{
		{"file:///", dir + "/2014-01-01/05/_READY", true, ""},
		{"file:", dir + "/2014-01-01/05", true, ""},
		{"file://localhost/", dir + "/nope", false, ""},
		{"file:///", dir + "/2014-01-01/05/_READY/under-a-file", false, ""},
		{"", dir, false, "no default"},
		{"hdfs://nn:8020", "/x", false, `no support for scheme "hdfs"`},
		{"file://otherhost/", "/x", false, "not a local"},
		{"nonsense", "/x", false, "no scheme"},
	} {
		got, err := m.Exists(ctx, tc.fs, tc.path)
		if got != tc.want || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) && !strings.Contains(err.Error(), "installation has no default") {
			t.Errorf("Exists(%q, %q) = %v, %v; want %v, %q", tc.fs, tc.path, got, err, tc.want, tc.err)
		}
	}
	m = NewMux("file:///")
	if ok, err := m.Exists(ctx, "", dir); !ok || err != nil {
		t.Fatalf("default fs: %v %v", ok, err)
	}
	hd := &fakeFS{exists: map[string]bool{"hdfs://nn/x": true}}
	m.Handle("hdfs", hd)
	if ok, err := m.Exists(ctx, "hdfs://nn", "/x"); !ok || err != nil {
		t.Fatalf("hdfs: %v %v", ok, err)
	}
}

func TestMemoAsksOncePerPath(t *testing.T) {
	fs := &fakeFS{exists: map[string]bool{"hdfs://nn/in": true}}
	memo := NewMemo(fs)
	tr := workflow.Trigger{Type: workflow.TriggerAnd, Triggers: []workflow.Trigger{
		{Type: workflow.TriggerHDFSCheck, Path: "/in", FS: "hdfs://nn"},
		{Type: workflow.TriggerHDFSCheck, Path: "/in", FS: "hdfs://nn"},
	}}
	for range 5 {
		Evaluate(context.Background(), Env{FS: memo}, &tr, slotTime, slotTime)
	}
	if n := fs.calls.Load(); n != 1 {
		t.Fatalf("%d calls", n)
	}
}

type panicFS struct{}

func (panicFS) Exists(context.Context, string, string) (bool, error) { panic("boom") }

func TestPanicIsAnError(t *testing.T) {
	tr := workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: "/x"}
	st := Evaluate(context.Background(), Env{FS: panicFS{}}, &tr, slotTime, slotTime)
	if st.Ready || !strings.Contains(st.Error, "boom") {
		t.Fatalf("%+v", st)
	}
}
