package statedb

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// TestPruneDropsOldRunsAndEmptyRecords: a prune left every record of
// submissions (run/<workflow>) whole, so a workflow's record kept the
// submissions of workflows that stopped submitting, and one of a workflow
// gone from the workflows directory stayed for ever. Now a prune drops the
// submissions older than its limit from every record, and removes a record
// left empty; a workflow known by its record only is pruned too, and a
// record with nothing old is not rewritten.
func TestPruneDropsOldRunsAndEmptyRecords(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenWith(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	before := now.Add(-9 * 24 * time.Hour)
	old := store.Run{Slot: before.Add(-3 * time.Hour), Attempt: 0, At: before.Add(-time.Hour)}
	recent := store.Run{Slot: now.Add(-26 * time.Hour), Attempt: 1, At: now.Add(-25 * time.Hour)}
	if err := db.Put(slot.State{ID: slot.ID{Workflow: "wc", Time: recent.Slot}, Status: slot.Success}); err != nil {
		t.Fatal(err)
	}
	if failed := db.PutRuns(map[string][]store.Run{
		"wc":     {old, recent},
		"idle":   {old},    // no slot state: known by its record only
		"recent": {recent}, // nothing to drop
	}); failed != nil {
		t.Fatal(failed)
	}
	recentFile := filepath.Join(dir, "run", "recent")
	fi, err := os.Stat(recentFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Prune(before, now); err != nil {
		t.Fatal(err)
	}
	want := map[string][]store.Run{"wc": {recent}, "idle": nil, "recent": {recent}}
	for wf, w := range want {
		got, err := db.Runs(wf)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(w, got); d != "" {
			t.Errorf("the record of %s after the prune (-want +got):\n%s", wf, d)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "run", "idle")); !os.IsNotExist(err) {
		t.Errorf("the record left empty is still there: %v", err)
	}
	if fi2, err := os.Stat(recentFile); err != nil || !os.SameFile(fi, fi2) {
		t.Errorf("a record with nothing to drop was rewritten (%v)", err)
	}
}
