package trigger

import (
	"math"
	"sort"
	"time"

	"github.com/celos-go/celos/schema/workflow"
)

// Reads returns, for every workflow whose slot states a success, failure
// or sinceLast trigger in t reads, the earliest slot it reads relative to
// the evaluated slot's time, in seconds: the smallest sum of the offsets
// on a path from t to a success or failure trigger naming that workflow,
// or to a sinceLast trigger minus its seconds (negative: before the slot, as
// `offset -864000` around a success trigger reads the slot ten days
// earlier). Offsets nest (their seconds add up); and, or and not read what
// their children read; delay, hdfsCheck, always, dataVolume and event read
// no slot state.
// Triggers nested deeper than workflow.MaxTriggerDepth are never evaluated
// and read nothing, as in Evaluate.
func Reads(t *workflow.Trigger) map[string]int64 {
	out := make(map[string]int64)
	var walk func(t *workflow.Trigger, off int64, depth int)
	walk = func(t *workflow.Trigger, off int64, depth int) {
		if t == nil || depth > workflow.MaxTriggerDepth {
			return
		}
		read := func(wf string, off int64) {
			if cur, ok := out[wf]; !ok || off < cur {
				out[wf] = off
			}
		}
		switch t.Type {
		case workflow.TriggerSuccess, workflow.TriggerFailure:
			read(t.Workflow, off)
		case workflow.TriggerSinceLast:
			// Ready when no SUCCESS lies in (slot − seconds, slot]: it
			// reads that far back (a success pruned earlier would make
			// it ready too soon).
			read(t.Workflow, off-t.Seconds)
		case workflow.TriggerAnd, workflow.TriggerOr:
			for i := range t.Triggers {
				walk(&t.Triggers[i], off, depth+1)
			}
		case workflow.TriggerNot:
			walk(t.Trigger, off, depth+1)
		case workflow.TriggerOffset:
			// At most 16 levels of ±100 years: no overflow of int64.
			walk(t.Trigger, off+t.Seconds, depth+1)
		}
	}
	walk(t, 0, 0)
	return out
}

// LookBack is how far before its own slots a workflow's trigger reads the
// slot states of a workflow (itself or another).
type LookBack struct {
	// Workflow is the workflow whose states are read.
	Workflow string
	// By is the reading workflow (with the longest look-back, the first
	// by id among equals).
	By string
	// Back is how far before the reader's slot time the oldest read slot
	// is (positive; saturated at the largest time.Duration).
	Back time.Duration
}

// LookBacks returns, for every workflow whose states a trigger of ws reads
// at a time before the reading slot, the longest such look-back and who
// reads it, sorted by Workflow. Workflows read only at or after the slot
// time (no offset, or positive offsets) are not listed: the window that
// is stepped covers them.
func LookBacks(ws []*workflow.Workflow) []LookBack {
	longest := make(map[string]LookBack)
	for _, w := range ws {
		for read, off := range Reads(&w.Trigger) {
			if off >= 0 {
				continue
			}
			lb := LookBack{Workflow: read, By: w.ID, Back: secondsDuration(-off)}
			if cur, ok := longest[read]; !ok || lb.Back > cur.Back || (lb.Back == cur.Back && lb.By < cur.By) {
				longest[read] = lb
			}
		}
	}
	out := make([]LookBack, 0, len(longest))
	for _, lb := range longest {
		out = append(out, lb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workflow < out[j].Workflow })
	return out
}

// secondsDuration converts positive seconds to a Duration, saturating.
func secondsDuration(s int64) time.Duration {
	if s > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s) * time.Second
}

// Retention is how long the final slot states of lb.Workflow must be kept
// so that every trigger can still read them: base (the retention that
// covers the stepped window, statedb.MinRetention) plus the look-back,
// saturating. A workflow no trigger reads before its slot needs only base.
func (lb LookBack) Retention(base time.Duration) time.Duration {
	if lb.Back > math.MaxInt64-base {
		return math.MaxInt64
	}
	return base + lb.Back
}
