package statepg

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// TestPruneDropsOldRuns: a prune left celos_runs whole; now it deletes
// the submissions older than its limit, of every workflow (one known by
// its record only too), as statedb drops them from run/<workflow>.
func TestPruneDropsOldRuns(t *testing.T) {
	db, _ := openTest(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	before := now.Add(-9 * 24 * time.Hour)
	old := store.Run{Slot: before.Add(-3 * time.Hour), Attempt: 0, At: before.Add(-time.Hour)}
	recent := store.Run{Slot: now.Add(-26 * time.Hour), Attempt: 1, At: now.Add(-25 * time.Hour)}
	if err := db.Put(slot.State{ID: slot.ID{Workflow: "wc", Time: recent.Slot}, Status: slot.Success}); err != nil {
		t.Fatal(err)
	}
	if failed := db.PutRuns(map[string][]store.Run{"wc": {old, recent}, "idle": {old}}); failed != nil {
		t.Fatal(failed)
	}
	if _, err := db.Prune(before, now); err != nil {
		t.Fatal(err)
	}
	for wf, w := range map[string][]store.Run{"wc": {recent}, "idle": nil} {
		got, err := db.Runs(wf)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(w, got); d != "" {
			t.Errorf("the record of %s after the prune (-want +got):\n%s", wf, d)
		}
	}
}
