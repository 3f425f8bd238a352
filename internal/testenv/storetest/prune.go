package storetest

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// Pruner is what a store offers for `celos db prune` and the server's
// --prune-older-than, with the writes and reads that show what it did.
type Pruner interface {
	Put(slot.State) error
	Range(wf string, start, end time.Time) ([]slot.State, error)
	MarkRerun(id slot.ID, at time.Time) error
	RerunMarks(wf string) ([]store.RerunMark, error)
	PutIntents(map[slot.ID]store.Intent) map[slot.ID]error
	GetIntent(slot.ID) (store.Intent, bool, error)
	PutRuns(set map[string][]store.Run) map[string]error
	Runs(wf string) ([]store.Run, error)
	Prune(before, now time.Time) (int, error)
	PruneBefore(now time.Time, before func(wf string) time.Time) (int, error)
}

// RunPrune runs the prune suite; open returns a new, empty store.
func RunPrune(t *testing.T, open func(t *testing.T) Pruner) {
	t.Run("Prune", func(t *testing.T) { prune(t, open(t)) })
	t.Run("PruneRefusesRecent", func(t *testing.T) { pruneRefusesRecent(t, open(t)) })
}

// prune: what Prune deletes and keeps, in every workflow, whatever
// records a workflow has: final slots older than the limit go with their
// intents and expired markers; slots that are not final stay whatever
// their age, and so do their intents and markers; an intent of an old
// slot without a record goes, in a workflow that has no slot at all too,
// as does an expired marker there; submissions before the limit go.
func prune(t *testing.T, db Pruner) {
	now := time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC)
	before := now.Add(-20 * 24 * time.Hour)
	old := func(h int) time.Time { return before.Add(-time.Duration(h) * time.Hour) }
	recent := func(h int) time.Time { return before.Add(time.Duration(h) * time.Hour) }
	id := func(wf string, t time.Time) slot.ID { return slot.ID{Workflow: wf, Time: t} }
	states := []slot.State{
		{ID: id("a", old(3)), Status: slot.Success, ExternalID: "j1"},
		{ID: id("a", old(2)), Status: slot.Running, ExternalID: "j2"},
		{ID: id("a", old(1)), Status: slot.Failure, ExternalID: "j3", RetryCount: 2},
		{ID: id("a", recent(1)), Status: slot.Success, ExternalID: "j4"},
		{ID: id("b", old(5)), Status: slot.Waiting},
		{ID: id("b", old(4)), Status: slot.WaitTimeout},
		{ID: id("b", old(3)), Status: slot.Killed},
		{ID: id("b", old(2)), Status: slot.Ready},
	}
	for _, st := range states {
		if err := db.Put(st); err != nil {
			t.Fatal(err)
		}
	}
	markAt := now.Add(-store.RerunExpiry - time.Hour) // expired
	for _, sid := range []slot.ID{id("a", old(3)), id("a", old(2)), id("marked", old(8))} {
		if err := db.MarkRerun(sid, markAt); err != nil {
			t.Fatal(err)
		}
	}
	intents := map[slot.ID]store.Intent{
		id("a", old(3)):        {Attempt: 0, Time: old(3)},    // final: goes
		id("a", old(2)):        {Attempt: 0, Time: old(2)},    // running: stays
		id("a", old(9)):        {Attempt: 0, Time: old(9)},    // no record: goes
		id("b", old(2)):        {Attempt: 0, Time: old(2)},    // ready: stays
		id("ghost", old(7)):    {Attempt: 1, Time: old(7)},    // no record, no slot at all: goes
		id("ghost", recent(1)): {Attempt: 0, Time: recent(1)}, // recent: stays
	}
	if failed := db.PutIntents(intents); failed != nil {
		t.Fatal(failed)
	}
	if failed := db.PutRuns(map[string][]store.Run{
		"a":     {{Slot: old(3), At: old(3)}, {Slot: recent(1), At: recent(1)}},
		"ghost": {{Slot: old(7), Attempt: 1, At: old(7)}},
	}); failed != nil {
		t.Fatal(failed)
	}
	n, err := db.Prune(before, now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("Prune deleted %d slot states, want 4 (a: 2, b: 2)", n)
	}
	type left struct {
		States  map[string][]string
		Intents []string
		Marks   map[string][]time.Time
		Runs    map[string][]store.Run
	}
	got := left{States: map[string][]string{}, Marks: map[string][]time.Time{}, Runs: map[string][]store.Run{}}
	for _, wf := range []string{"a", "b", "ghost", "marked"} {
		sts, err := db.Range(wf, old(100), now)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if st.Status != slot.Waiting || st.ExternalID != "" { // Range fills the window with WAITING
				got.States[wf] = append(got.States[wf], st.ID.String()+" "+string(st.Status))
			}
		}
		marks, err := db.RerunMarks(wf)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range marks {
			got.Marks[wf] = append(got.Marks[wf], m.Slot)
		}
		runs, err := db.Runs(wf)
		if err != nil {
			t.Fatal(err)
		}
		if runs != nil {
			got.Runs[wf] = runs
		}
	}
	for sid := range intents {
		_, ok, err := db.GetIntent(sid)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got.Intents = append(got.Intents, sid.String())
		}
	}
	want := left{
		States: map[string][]string{
			"a": {id("a", old(2)).String() + " RUNNING", id("a", recent(1)).String() + " SUCCESS"},
			"b": {id("b", old(2)).String() + " READY"},
		},
		Intents: []string{id("a", old(2)).String(), id("b", old(2)).String(), id("ghost", recent(1)).String()},
		Marks:   map[string][]time.Time{"a": {old(2)}},
		Runs:    map[string][]store.Run{"a": {{Slot: recent(1), At: recent(1)}}},
	}
	sortStrings := cmp.Transformer("sort", func(in []string) []string {
		out := append([]string(nil), in...)
		slicesSort(out)
		return out
	})
	if d := cmp.Diff(want, got, sortStrings); d != "" {
		t.Errorf("left after Prune (-want +got):\n%s", d)
	}
}

// pruneRefusesRecent: a limit inside store's minimum retention is refused
// and deletes nothing.
func pruneRefusesRecent(t *testing.T, db Pruner) {
	now := time.Date(2026, 3, 30, 12, 0, 0, 0, time.UTC)
	st := slot.State{ID: slot.ID{Workflow: "a", Time: now.Add(-2 * 24 * time.Hour)}, Status: slot.Success}
	if err := db.Put(st); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Prune(now.Add(-24*time.Hour), now); err == nil || n != 0 {
		t.Errorf("Prune of the last day: %d, %v; want a refusal", n, err)
	}
	if n, err := db.PruneBefore(now, func(string) time.Time { return now.Add(-24 * time.Hour) }); err == nil || n != 0 {
		t.Errorf("PruneBefore of the last day: %d, %v; want a refusal", n, err)
	}
	sts, err := db.Range("a", st.ID.Time, st.ID.Time.Add(time.Second))
	if err != nil || len(sts) != 1 || sts[0].Status != slot.Success {
		t.Errorf("after a refused prune: %v, %v", sts, err)
	}
}

func slicesSort(s []string) { sort.Strings(s) }
