package trigger

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

func success(wf string) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: wf}
}

func offset(s int64, t workflow.Trigger) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerOffset, Seconds: s, Trigger: &t}
}

func not(t workflow.Trigger) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerNot, Trigger: &t}
}

func and(ts ...workflow.Trigger) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerAnd, Triggers: ts}
}

func or(ts ...workflow.Trigger) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerOr, Triggers: ts}
}

func delay(s int64) workflow.Trigger {
	return workflow.Trigger{Type: workflow.TriggerDelay, Seconds: s}
}

func TestReads(t *testing.T) {
	deep := success("deep")
	for range workflow.MaxTriggerDepth + 1 {
		deep = offset(-1, deep)
	}
	for _, tc := range []struct {
		name string
		t    workflow.Trigger
		want map[string]int64
	}{
		{"always", workflow.Trigger{Type: workflow.TriggerAlways}, map[string]int64{}},
		{"hdfsCheck", workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: "/x"}, map[string]int64{}},
		{"delay reads nothing", delay(86400), map[string]int64{}},
		{"success", success("a"), map[string]int64{"a": 0}},
		{"the issue: offset -864000 around success", offset(-864000, success("a")), map[string]int64{"a": -864000}},
		{"positive offset", offset(3600, success("a")), map[string]int64{"a": 3600}},
		{"nested offsets add up", offset(-86400, offset(-3600, success("a"))), map[string]int64{"a": -90000}},
		{"nested negative and positive", offset(-86400, offset(90000, success("a"))), map[string]int64{"a": 3600}},
		{"offset around delay reads nothing", offset(-86400, delay(60)), map[string]int64{}},
		{"not", not(offset(-60, success("a"))), map[string]int64{"a": -60}},
		{"offset around not", offset(-120, not(success("a"))), map[string]int64{"a": -120}},
		{"and: the earliest of each workflow", and(success("a"), offset(-7200, success("a")), offset(-60, success("b")), delay(10)),
			map[string]int64{"a": -7200, "b": -60}},
		{"or under offset", offset(-100, or(success("a"), offset(50, success("b")), not(offset(-900, success("c"))))),
			map[string]int64{"a": -100, "b": -50, "c": -1000}},
		{"self", offset(-3600, success("me")), map[string]int64{"me": -3600}},
		{"failure as success", offset(-60, workflow.Trigger{Type: workflow.TriggerFailure, Workflow: "a"}), map[string]int64{"a": -60}},
		{"sinceLast reads its seconds back", or(workflow.Trigger{Type: workflow.TriggerSinceLast, Workflow: "me", Seconds: 30 * 86400},
			workflow.Trigger{Type: workflow.TriggerDataVolume, Path: "/in/*"}, workflow.Trigger{Type: workflow.TriggerEvent, Bucket: "b", Key: "k"}),
			map[string]int64{"me": -30 * 86400}},
		{"sinceLast under offset", offset(3600, workflow.Trigger{Type: workflow.TriggerSinceLast, Workflow: "a", Seconds: 7200}), map[string]int64{"a": -3600}},
		{"100 years × 16 levels does not overflow", func() workflow.Trigger {
			tr := success("far")
			for range workflow.MaxTriggerDepth {
				tr = offset(-workflow.MaxTriggerSeconds, tr)
			}
			return tr
		}(), map[string]int64{"far": -workflow.MaxTriggerDepth * workflow.MaxTriggerSeconds}},
		{"deeper than evaluated: nothing read", deep, map[string]int64{}},
		{"nil child", workflow.Trigger{Type: workflow.TriggerNot}, map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Reads(&tc.t)); diff != "" {
				t.Errorf("Reads (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookBacks(t *testing.T) {
	wf := func(id string, tr workflow.Trigger) *workflow.Workflow {
		return &workflow.Workflow{ID: id, Trigger: tr}
	}
	ws := []*workflow.Workflow{
		wf("a", workflow.Trigger{Type: workflow.TriggerAlways}),
		wf("b", offset(-864000, success("a"))),
		wf("c", and(offset(-3600, success("a")), offset(-86400, success("c")))),
		wf("d", offset(3600, success("b"))),                       // forward only: not listed
		wf("e", and(success("b"), offset(-864000, success("a")))), // ties with b: b named
		{ID: "dep", Schedule: workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: "b"}, Trigger: offset(-7200, success("h"))}, // a dependent schedule reads nothing itself
		wf("f", offset(-workflow.MaxTriggerSeconds, offset(-workflow.MaxTriggerSeconds, offset(-workflow.MaxTriggerSeconds, offset(-workflow.MaxTriggerSeconds, success("g")))))),
	}
	want := []LookBack{
		{Workflow: "a", By: "b", Back: 10 * 24 * time.Hour},
		{Workflow: "c", By: "c", Back: 24 * time.Hour},
		{Workflow: "g", By: "f", Back: math.MaxInt64}, // 400 years saturates
		{Workflow: "h", By: "dep", Back: 2 * time.Hour},
	}
	got := LookBacks(ws)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LookBacks (-want +got):\n%s", diff)
	}
	if r := got[0].Retention(8 * 24 * time.Hour); r != 18*24*time.Hour {
		t.Errorf("retention for a: %v", r)
	}
	if r := got[2].Retention(8 * 24 * time.Hour); r != math.MaxInt64 {
		t.Errorf("retention for g: %v", r)
	}
}

// recorder is a States that records the slots read.
type recorder struct {
	mu    sync.Mutex
	reads map[string]int64 // workflow → earliest offset read (seconds)
	base  time.Time
}

func (r *recorder) Get(id slot.ID) (slot.State, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	off := int64(id.Time.Sub(r.base) / time.Second)
	if cur, ok := r.reads[id.Workflow]; !ok || off < cur {
		r.reads[id.Workflow] = off
	}
	return slot.State{}, false, nil
}

// FuzzReadsMatchesEvaluate: the slots Evaluate actually reads are exactly
// those Reads predicts, for any trigger built from the input (and, or and
// not evaluate every child, so every success trigger is read).
func FuzzReadsMatchesEvaluate(f *testing.F) {
	f.Add([]byte{4, 0xf0, 1, 0})
	f.Add([]byte{2, 3, 1, 1, 4, 0x10, 5, 1, 2})
	f.Add([]byte{3, 4, 0x80, 4, 0x7f, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		i := 0
		next := func() byte {
			if i >= len(data) {
				return 0
			}
			i++
			return data[i-1]
		}
		nodes := 0 // bounded: and/or of and/or would grow exponentially
		var build func(depth int) workflow.Trigger
		build = func(depth int) workflow.Trigger {
			nodes++
			if depth > 20 || nodes > 200 {
				return success("z")
			}
			switch next() % 7 {
			case 0:
				return workflow.Trigger{Type: workflow.TriggerAlways}
			case 1:
				b := next()
				tr := success(string('a' + rune(b%3)))
				if b&0x80 != 0 { // a failure trigger reads the same slot
					tr.Type = workflow.TriggerFailure
				}
				return tr
			case 2:
				n := int(next() % 4)
				ts := make([]workflow.Trigger, n)
				for j := range ts {
					ts[j] = build(depth + 1)
				}
				return and(ts...)
			case 3:
				n := int(next() % 4)
				ts := make([]workflow.Trigger, n)
				for j := range ts {
					ts[j] = build(depth + 1)
				}
				return or(ts...)
			case 4:
				// Offsets of up to ±10 years in units of about a day.
				s := int64(int8(next())) * 86400 * 29
				return offset(s, build(depth+1))
			case 5:
				return delay(int64(next()) * 60)
			}
			return not(build(depth + 1))
		}
		tr := build(0)
		base := time.Date(2015, 9, 13, 12, 0, 0, 0, time.UTC)
		rec := &recorder{reads: make(map[string]int64), base: base}
		Evaluate(context.Background(), Env{States: rec}, &tr, base, base.Add(time.Hour))
		if diff := cmp.Diff(rec.reads, Reads(&tr)); diff != "" {
			t.Fatalf("Reads disagrees with what Evaluate read (-read +predicted):\n%s", diff)
		}
	})
}
