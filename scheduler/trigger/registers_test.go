package trigger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/schema/workflow"
)

// lookupRegs is regs that also looks keys up one by one, counting.
type lookupRegs struct {
	regs
	lookups atomic.Int64
}

func (r *lookupRegs) HasRegister(bucket, key string) (bool, error) {
	r.lookups.Add(1)
	if bucket == "broken" || bucket == "no-lookup" {
		return false, errors.New("state database: permission denied")
	}
	return slices.Contains(r.buckets[bucket], key), nil
}

// bigBucket is a bucket of years of hourly keys and the key k-05.
func bigBucket() []string {
	keys := []string{"k-05"}
	for i := 0; i < 20000; i++ {
		keys = append(keys, fmt.Sprintf("old-%05d", i))
	}
	return keys
}

// TestStepEnvLooksUpRegisterKeys: a step's Env asks a store that can look
// keys up for the keys the slots' event triggers name, each distinct key
// once however many slots and workflows ask, and does not list the
// bucket: a step's cost does not grow with the bucket.
func TestStepEnvLooksUpRegisterKeys(t *testing.T) {
	rg := &lookupRegs{regs: regs{buckets: map[string][]string{"ingest": bigBucket()}}}
	env := NewStepEnv(nil, nil, rg)
	trig := workflow.Trigger{Type: workflow.TriggerEvent, Bucket: "ingest", Key: "k-${hour}"}
	var ready []bool
	for wf := 0; wf < 50; wf++ { // 50 workflows with the same trigger
		for h := 0; h < 3; h++ { // 3 slots each
			st := Evaluate(context.Background(), env, &trig, slotTime.Add(time.Duration(h)*time.Hour), slotTime)
			if st.Error != "" {
				t.Fatalf("slot %d: %+v", h, st)
			}
			if wf == 0 {
				ready = append(ready, st.Ready)
			}
		}
	}
	if got := rg.calls.Load(); got != 0 {
		t.Errorf("%d register listings, want 0", got)
	}
	if got := rg.lookups.Load(); got != 3 {
		t.Errorf("%d register lookups, want 3 (one per distinct key)", got)
	}
	if want := []bool{true, false, false}; !slices.Equal(ready, want) {
		t.Errorf("ready %v, want %v (k-05 only)", ready, want)
	}
	// Without the step's memory, one lookup per evaluation, no listing.
	plain := Env{Registers: rg}
	if st := Evaluate(context.Background(), plain, &trig, slotTime, slotTime); !st.Ready || st.Error != "" {
		t.Errorf("plain evaluation of k-05: %+v", st)
	}
	if got := rg.calls.Load(); got != 0 {
		t.Errorf("%d register listings after a plain evaluation, want 0", got)
	}
}

// TestStepEnvListsABucketAskedForManyKeys: a step that asks for more than
// maxRegisterLookups distinct keys of one bucket lists it once for the
// rest (never more lookups than that, never a second listing), with the
// same answers; a key looked up keeps its answer for the step.
func TestStepEnvListsABucketAskedForManyKeys(t *testing.T) {
	keys := bigBucket()
	for wf := 0; wf < 3*maxRegisterLookups; wf += 7 {
		keys = append(keys, fmt.Sprintf("wf%d-05", wf))
	}
	rg := &lookupRegs{regs: regs{buckets: map[string][]string{"ingest": keys}}}
	env := NewStepEnv(nil, nil, rg)
	for round := 0; round < 2; round++ {
		for wf := 0; wf < 3*maxRegisterLookups; wf++ { // a key of its own each
			trig := workflow.Trigger{Type: workflow.TriggerEvent, Bucket: "ingest", Key: fmt.Sprintf("wf%d-${hour}", wf)}
			st := Evaluate(context.Background(), env, &trig, slotTime, slotTime)
			if st.Error != "" || st.Ready != (wf%7 == 0) {
				t.Fatalf("round %d, workflow %d: %+v, want ready=%v", round, wf, st, wf%7 == 0)
			}
		}
	}
	if got := rg.lookups.Load(); got != maxRegisterLookups {
		t.Errorf("%d lookups, want %d", got, maxRegisterLookups)
	}
	if got := rg.calls.Load(); got != 1 {
		t.Errorf("%d listings, want 1", got)
	}
}

// TestRegisterLookupFails: a lookup that fails leaves the answer to the
// listing (its keys, or its error), once per step.
func TestRegisterLookupFails(t *testing.T) {
	for _, tt := range []struct {
		bucket string
		ready  bool
		err    string
	}{
		{"no-lookup", true, ""},                // the listing answers
		{"broken", false, "permission denied"}, // the listing fails too
	} {
		t.Run(tt.bucket, func(t *testing.T) {
			rg := &lookupRegs{regs: regs{buckets: map[string][]string{tt.bucket: {"k-05"}}}}
			trig := workflow.Trigger{Type: workflow.TriggerEvent, Bucket: tt.bucket, Key: "k-${hour}"}
			env := NewStepEnv(nil, nil, rg)
			for i := 0; i < 3; i++ {
				st := Evaluate(context.Background(), env, &trig, slotTime, slotTime)
				if st.Ready != tt.ready || (st.Error == "") != (tt.err == "") || !strings.Contains(st.Error, tt.err) {
					t.Fatalf("%+v, want ready=%v error %q", st, tt.ready, tt.err)
				}
			}
			if got := rg.calls.Load(); got != 1 {
				t.Errorf("%d listings in a step, want 1", got)
			}
			if st := Evaluate(context.Background(), Env{Registers: rg}, &trig, slotTime, slotTime); st.Ready != tt.ready || !strings.Contains(st.Error, tt.err) {
				t.Errorf("plain evaluation: %+v, want ready=%v error %q", st, tt.ready, tt.err)
			}
		})
	}
}

// timedRegs is lookupRegs whose reads take time on a clock of their own:
// a lookup 1 ms, a listing listCost.
type timedRegs struct {
	lookupRegs
	clock    time.Time
	listCost time.Duration
}

func (r *timedRegs) RegisterKeys(bucket, prefix string) ([]string, error) {
	r.clock = r.clock.Add(r.listCost)
	return r.lookupRegs.RegisterKeys(bucket, prefix)
}

func (r *timedRegs) HasRegister(bucket, key string) (bool, error) {
	r.clock = r.clock.Add(time.Millisecond)
	return r.lookupRegs.HasRegister(bucket, key)
}

// TestRegisterCostsChooseTheCheaperRead: with what the engine's steps
// learnt (RegisterCosts), a step lists a bucket it never listed, then
// looks keys up while a listing costs more than a step's lookups (a big
// bucket), listing it again after max(8, 4 × listing ÷ lookups) steps to
// learn its cost anew, and lists while a listing costs less (a small
// bucket on a store where a lookup is a round trip); a slow listing turns
// the choice for some steps only; a step that asks nothing of the bucket
// changes nothing. The answers are the same whichever it reads.
func TestRegisterCostsChooseTheCheaperRead(t *testing.T) {
	// 10 slots ask 10 keys (k-05 … k-14): 10 ms of lookups.
	step := func(t *testing.T, rg *timedRegs, costs *RegisterCosts, bucket string) string {
		t.Helper()
		l0, c0 := rg.lookups.Load(), rg.calls.Load()
		env := NewStepEnv(nil, nil, rg).WithRegisterCosts(costs)
		trig := workflow.Trigger{Type: workflow.TriggerEvent, Bucket: bucket, Key: "k-${hour}"}
		for h := 0; h < 10; h++ {
			st := Evaluate(context.Background(), env, &trig, slotTime.Add(time.Duration(h)*time.Hour), slotTime)
			if st.Error != "" || st.Ready != (h == 0) {
				t.Fatalf("slot %d: %+v, want ready only for k-05", h, st)
			}
		}
		switch l, c := rg.lookups.Load()-l0, rg.calls.Load()-c0; {
		case l == 10 && c == 0:
			return "u" // looked up
		case l == 0 && c == 1:
			return "L" // listed
		default:
			return fmt.Sprintf("(%d lookups, %d listings)", l, c)
		}
	}
	for _, tt := range []struct {
		name     string
		listCost func(i int) time.Duration // of step i
		want     string                    // the reads of each step
	}{
		// 4 × 50 ÷ 10: listed again every 20 steps.
		{"big bucket", func(int) time.Duration { return 50 * time.Millisecond }, "Luuuuuuuuuuuuuuuuuuu" + "Luuuuu"},
		{"small bucket", func(int) time.Duration { return 5 * time.Millisecond }, "LuLLLLLLLLLLLLLLLLLL" + "LLLLLL"},
		// One listing of 40 ms among those of 5: the average goes to
		// 13.75 ms, over the lookups' 10: the steps look keys up, listing
		// again after 8 steps (11.56 ms) and 8 more (9.92 ms: listed from
		// then on).
		{"one slow listing", func(i int) time.Duration {
			if i == 5 {
				return 40 * time.Millisecond
			}
			return 5 * time.Millisecond
		}, "LuLLLL" + "uuuuuuu" + "L" + "uuuuuuu" + "LLLLL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rg := &timedRegs{lookupRegs: lookupRegs{regs: regs{buckets: map[string][]string{"ingest": {"k-05"}, "other": {"k-05"}}}}}
			costs := &RegisterCosts{now: func() time.Time { return rg.clock }}
			got := ""
			for i := range len(tt.want) {
				rg.listCost = tt.listCost(i)
				got += step(t, rg, costs, "ingest")
				if i == 1 { // a step on another bucket only
					step(t, rg, costs, "other")
				}
			}
			if got != tt.want {
				t.Errorf("reads of each step (L listed, u looked up):\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
