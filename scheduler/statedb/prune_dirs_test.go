package statedb

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// TestPruneRemovesEmptyTransientDirs: submit intents and rerun markers
// leave their day directories empty once removed; Prune removes the empty
// ones of days before the limit (the soak found them piling up, 1 per
// workflow per day, and the directory cache with them), and keeps the
// others.
func TestPruneRemovesEmptyTransientDirs(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	now := ts("2024-03-01T00:00Z")
	for d := 0; d < 20; d++ {
		id := slot.ID{Workflow: "wf", Time: ts("2024-02-01T00:00Z").Add(time.Duration(d) * 24 * time.Hour)}
		if err := db.PutIntent(id, Intent{Time: id.Time}); err != nil {
			t.Fatal(err)
		}
		if err := db.Put(slot.State{ID: id, Status: slot.Running, ExternalID: "x"}); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteIntent(id); err != nil {
			t.Fatal(err)
		}
		if err := db.Put(slot.State{ID: id, Status: slot.Success, ExternalID: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	// A rerun marker on an old day that is not final yet stays, and so does its directory.
	old := slot.ID{Workflow: "wf", Time: ts("2024-02-02T05:00Z")}
	if err := db.Put(slot.State{ID: old, Status: slot.Waiting}); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkRerun(old, now); err != nil {
		t.Fatal(err)
	}
	count := func(kind string) int {
		es, _ := os.ReadDir(filepath.Join(dir, kind, "wf"))
		return len(es)
	}
	if n := count("intent"); n != 20 {
		t.Fatalf("%d intent day directories before the prune", n)
	}
	if _, err := db.Prune(ts("2024-02-15T00:00Z"), now); err != nil {
		t.Fatal(err)
	}
	if n := count("intent"); n != 6 { // 2024-02-15 .. 2024-02-20
		t.Errorf("%d intent day directories after the prune, want 6", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "rerun", "wf", "2024-02-02")); err != nil {
		t.Errorf("the day directory of a live rerun marker was removed: %v", err)
	}
	if n := count("state"); n != 6+1 {
		t.Errorf("%d state day directories after the prune, want 7", n)
	}
	// The cache forgot the removed directories: writing there again works.
	id := slot.ID{Workflow: "wf", Time: ts("2024-02-03T00:00Z")}
	if err := db.PutIntent(id, Intent{Time: now}); err != nil {
		t.Fatalf("intent on a pruned day: %v", err)
	}
}
