package statedb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/store"

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
		if err := db.PutIntent(id, store.Intent{Time: id.Time}); err != nil {
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
	if err := db.PutIntent(id, store.Intent{Time: now}); err != nil {
		t.Fatalf("intent on a pruned day: %v", err)
	}
}

// TestPruneSyncsEachDirectoryOnce: pruning a long history removes every
// old final slot, intent and expired rerun marker (more than one chunk of
// pruneChunk files, so the lock is taken several times) with one
// directory sync per touched day directory, not one per file, and keeps
// what is not final or recent.
func TestPruneSyncsEachDirectoryOnce(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	now := ts("2024-03-01T00:00Z")
	start := ts("2024-01-01T00:00Z")
	const days, perDay = 3, 2 * pruneChunk / 3 // 3 days, more than 2 chunks of state files in all
	bt := db.Batch()
	intents := map[slot.ID]store.Intent{}
	for d := 0; d < days; d++ {
		for i := 0; i < perDay; i++ {
			id := slot.ID{Workflow: "wf", Time: start.Add(time.Duration(d)*24*time.Hour + time.Duration(i)*time.Minute)}
			if err := bt.Put(slot.State{ID: id, Status: slot.Success, ExternalID: "x"}); err != nil {
				t.Fatal(err)
			}
			if i%10 == 0 {
				intents[id] = store.Intent{Time: id.Time}
			}
		}
	}
	live := slot.ID{Workflow: "wf", Time: start.Add(time.Hour + 30*time.Second)}
	recent := slot.ID{Workflow: "wf", Time: ts("2024-02-20T00:00Z")}
	bt.Put(slot.State{ID: live, Status: slot.Running, ExternalID: "y"})
	bt.Put(slot.State{ID: recent, Status: slot.Success, ExternalID: "z"})
	if failed := bt.Commit(); failed != nil {
		t.Fatal(failed)
	}
	if failed := db.PutIntents(intents); len(failed) != 0 {
		t.Fatal(failed)
	}
	syncs := db.dirSyncs.Load()
	n, err := db.Prune(ts("2024-02-01T00:00Z"), now)
	if err != nil || n != days*perDay {
		t.Fatalf("pruned %d, %v; want %d", n, err, days*perDay)
	}
	// At most one sync per touched day directory (state and intent) and
	// per parent of a removed one.
	if got := db.dirSyncs.Load() - syncs; got > 2*days+2 {
		t.Errorf("%d directory syncs for %d day directories: one per file?", got, 2*days)
	}
	left, err := db.Range("wf", time.Unix(0, 0), now)
	if err != nil || len(left) != 2 || left[0].ID != live || left[1].ID != recent {
		t.Fatalf("left %+v %v", left, err)
	}
	for id := range intents {
		if _, ok, _ := db.GetIntent(id); ok {
			t.Fatalf("intent %s left", id)
		}
	}
	for _, d := range []string{"2024-01-02", "2024-01-03"} {
		if _, err := os.Stat(filepath.Join(dir, "state", "wf", d)); !os.IsNotExist(err) {
			t.Errorf("empty day directory %s left: %v", d, err)
		}
	}
	// The files are gone from disk too: a reopened database agrees.
	db.Close()
	db = open(t, dir)
	if left, _ := db.Range("wf", time.Unix(0, 0), now); len(left) != 2 {
		t.Fatalf("after reopening: %+v", left)
	}
}

// TestPruneBeforeKeepsEachWorkflowItsOwnRetention: a workflow given a
// longer retention keeps its old final slots; the others are pruned; a
// limit inside MinRetention leaves that workflow alone with an error.
func TestPruneBeforeKeepsEachWorkflowItsOwnRetention(t *testing.T) {
	db := open(t, t.TempDir())
	now := ts("2015-10-01T00:00Z")
	old := ts("2015-09-10T00:00Z")
	for _, wf := range []string{"read", "other", "recent"} {
		if err := db.Put(slot.State{ID: slot.ID{Workflow: wf, Time: old}, Status: slot.Success}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.PruneBefore(now, func(wf string) time.Time {
		switch wf {
		case "read":
			return now.Add(-30 * 24 * time.Hour)
		case "recent":
			return now.Add(-24 * time.Hour)
		}
		return now.Add(-MinRetention)
	})
	if n != 1 || err == nil || !strings.Contains(err.Error(), "prune recent:") {
		t.Errorf("PruneBefore = %d, %v", n, err)
	}
	for wf, want := range map[string]bool{"read": true, "other": false, "recent": true} {
		if _, found, _ := db.Get(slot.ID{Workflow: wf, Time: old}); found != want {
			t.Errorf("%s: found %v after prune, want %v", wf, found, want)
		}
	}
}

// TestPruneKeepsTheIntentOfASubmissionInFlight: the submit intent of an
// old slot that is READY (a backfill's rerun of a month-old slot, its
// submission cut short by a crash) is kept by a prune, whatever the slot's
// age: it is what tells the next step to ask the service for the job
// before submitting again. Only the intents of final slots (or of slots
// without a record) go.
func TestPruneKeepsTheIntentOfASubmissionInFlight(t *testing.T) {
	db := open(t, t.TempDir())
	now := ts("2024-03-01T00:00Z")
	ready := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	done := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	if err := db.Put(slot.State{ID: ready, Status: slot.Ready}); err != nil {
		t.Fatal(err)
	}
	if err := db.Put(slot.State{ID: done, Status: slot.Success}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []slot.ID{ready, done} {
		if err := db.PutIntent(id, store.Intent{Attempt: 0, Time: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Prune(ts("2024-02-01T00:00Z"), now); err != nil {
		t.Fatal(err)
	}
	if _, left, err := db.GetIntent(ready); err != nil || !left {
		t.Errorf("the intent of the READY slot %s was pruned (%v)", ready, err)
	}
	if _, left, err := db.GetIntent(done); err != nil || left {
		t.Errorf("the intent of the SUCCESS slot %s was kept (%v)", done, err)
	}
	db.Close()
	reopened := open(t, db.Dir())
	if _, left, err := reopened.GetIntent(ready); err != nil || !left {
		t.Errorf("after a restart, the intent of the READY slot %s is gone (%v)", ready, err)
	}
}
