package statepg

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
)

// fileOps is what the property test calls on both stores.
type fileOps interface {
	Put(slot.State) error
	PutStates([]slot.State) map[slot.ID]error
	MarkRerun(slot.ID, time.Time) error
	UnmarkRerun(slot.ID) error
	PutIntents(map[slot.ID]store.Intent) map[slot.ID]error
	DeleteIntents([]slot.ID) error
	SetPaused(string, bool) error
	Range(wf string, start, end time.Time) ([]slot.State, error)
	Active(wf string) ([]slot.State, error)
	Count(wf string) (map[slot.Status]int, error)
	RerunMarks(wf string) ([]store.RerunMark, error)
	GetIntent(slot.ID) (store.Intent, bool, error)
	Paused(string) bool
}

var (
	_ fileOps = (*statedb.DB)(nil)
	_ fileOps = (*DB)(nil)
)

// TestSameAsFileStore applies random writes (single puts, batches with a
// slot twice, rerun marks, intents, pauses) to the file store and to this
// one, and expects the same reads from both: from this store's index, and
// from a second instance that reads everything from the database.
func TestSameAsFileStore(t *testing.T) {
	_, dsn := openTest(t)
	base := time.Date(2024, 1, 1, 23, 0, 0, 0, time.UTC)
	wfs := []string{"a", "b", "c.d"}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		if err := pgtest.Shared(t).Exec(ctx, dbName(dsn), "TRUNCATE celos_workflows, celos_slots, celos_rerun_marks, celos_intents, celos_paused"); err != nil {
			rt.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "celos-statepg-prop-*")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		fdb, err := statedb.OpenWith(dir, statedb.Options{NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		defer fdb.Close()
		pdb, err := Open(ctx, dsn, Options{})
		if err != nil {
			rt.Fatal(err)
		}
		defer pdb.Close()
		genID := rapid.Custom(func(t *rapid.T) slot.ID {
			return slot.ID{Workflow: rapid.SampledFrom(wfs).Draw(t, "wf"),
				Time: base.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "h")) * 30 * time.Minute)}
		})
		genState := rapid.Custom(func(t *rapid.T) slot.State {
			return slot.State{ID: genID.Draw(t, "id"), Status: rapid.SampledFrom(slot.Statuses).Draw(t, "status"),
				ExternalID: rapid.SampledFrom([]string{"", "job-1", "x\"y", "é"}).Draw(t, "ext"),
				RetryCount: rapid.IntRange(0, 3).Draw(t, "retry")}
		})
		now := base.Add(24*time.Hour + 1234567*time.Nanosecond)
		both := func(f func(s fileOps) any) {
			a, b := f(fdb), f(pdb)
			if d := cmp.Diff(fmt.Sprint(a), fmt.Sprint(b)); d != "" {
				rt.Fatalf("the stores answer differently (-file +pg):\n%s", d)
			}
		}
		for range rapid.IntRange(1, 25).Draw(rt, "ops") {
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0:
				st := genState.Draw(rt, "put")
				both(func(s fileOps) any { return s.Put(st) })
			case 1:
				sts := rapid.SliceOfN(genState, 0, 6).Draw(rt, "batch")
				both(func(s fileOps) any { return s.PutStates(sts) })
			case 2:
				id := genID.Draw(rt, "mark")
				both(func(s fileOps) any { return s.MarkRerun(id, now) })
			case 3:
				id := genID.Draw(rt, "unmark")
				both(func(s fileOps) any { return s.UnmarkRerun(id) })
			case 4:
				ins := map[slot.ID]store.Intent{}
				for _, id := range rapid.SliceOfN(genID, 0, 3).Draw(rt, "intents") {
					ins[id] = store.Intent{Attempt: rapid.IntRange(0, 2).Draw(rt, "attempt"), Time: now}
				}
				both(func(s fileOps) any { return s.PutIntents(ins) })
			case 5:
				ids := rapid.SliceOfN(genID, 0, 3).Draw(rt, "del")
				both(func(s fileOps) any { return s.DeleteIntents(ids) })
			case 6:
				wf, p := rapid.SampledFrom(wfs).Draw(rt, "pwf"), rapid.Bool().Draw(rt, "paused")
				both(func(s fileOps) any { return s.SetPaused(wf, p) })
			}
		}
		snap := func(s fileOps) string {
			out := ""
			for _, wf := range wfs {
				sts, err := s.Range(wf, base, now)
				act, err2 := s.Active(wf)
				cnt, err3 := s.Count(wf)
				marks, err4 := s.RerunMarks(wf)
				out += fmt.Sprintf("%s %v active=%v count=%v marks=%v paused=%v errs=%v %v %v %v\n", wf, sts, act, cnt, marks, s.Paused(wf), err, err2, err3, err4)
				for h := range 6 {
					id := slot.ID{Workflow: wf, Time: base.Add(time.Duration(h) * 30 * time.Minute)}
					if in, ok, err := s.GetIntent(id); ok || err != nil {
						out += fmt.Sprintf("  intent %s %+v %v\n", id, in, err)
					}
				}
			}
			return out
		}
		fdb.Close()
		fdb2, err := statedb.Open(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer fdb2.Close()
		want := snap(fdb2)
		if d := cmp.Diff(want, snap(pdb)); d != "" {
			rt.Fatalf("the index differs from the file store (-file +pg):\n%s", d)
		}
		pdb2, err := Open(ctx, dsn, Options{})
		if err != nil {
			rt.Fatal(err)
		}
		defer pdb2.Close()
		if d := cmp.Diff(want, snap(pdb2)); d != "" {
			rt.Fatalf("the database differs from the file store (-file +pg):\n%s", d)
		}
	})
}
