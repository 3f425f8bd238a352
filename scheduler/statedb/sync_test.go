package statedb

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler/slot"
)

// TestBatchCommitSyncsBeforeAndAfterTheRenames checks the durability order
// of Batch.Commit (see Batch): every new state is in a temporary file made
// durable by a first syncfs before any rename, and a second syncfs after
// the renames makes them durable. The syncs are observed through syncFS,
// noting at each one which of the slot files already hold their new state.
func TestBatchCommitSyncsBeforeAndAfterTheRenames(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	ids := []slot.ID{
		{Workflow: "wf", Time: ts("2024-01-01T01:00Z")},
		{Workflow: "wf", Time: ts("2024-01-02T02:00Z")},
		{Workflow: "other", Time: ts("2024-01-01T01:00Z")},
	}
	for _, id := range ids { // the states before the batch
		if err := db.Put(slot.State{ID: id, Status: slot.Waiting}); err != nil {
			t.Fatal(err)
		}
	}
	// renamed counts the slot files that hold their new (RUNNING) state.
	renamed := func() int {
		n := 0
		for _, id := range ids {
			day, file := slotPath(id.Time)
			data, err := os.ReadFile(filepath.Join(dir, "state", id.Workflow, day, file))
			if err != nil {
				t.Fatal(err)
			}
			if status, _, _, err := ParseState(data); err == nil && status == slot.Running {
				n++
			}
		}
		return n
	}
	var syncs []string
	syncFS = func(fd int) error {
		syncs = append(syncs, fmt.Sprintf("syncfs with %d of %d renamed", renamed(), len(ids)))
		return unix.Syncfs(fd)
	}
	t.Cleanup(func() { syncFS = unix.Syncfs })

	b := db.Batch()
	for i, id := range ids {
		if err := b.Put(slot.State{ID: id, Status: slot.Running, ExternalID: fmt.Sprint("job-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if failed := b.Commit(); failed != nil {
		t.Fatalf("Commit: %v", failed)
	}
	want := []string{
		"syncfs with 0 of 3 renamed", // the temporary files' contents, before any rename
		"syncfs with 3 of 3 renamed", // the renames
	}
	if d := cmp.Diff(want, syncs); d != "" {
		t.Fatalf("file-system syncs of Commit (-want +got):\n%s", d)
	}
}

// TestBatchCommitNewDirectoriesWithoutDirectoryFsyncs: a batch that
// creates workflow and day directories does not fsync each new directory's
// parent (on a fresh 7-day fill that was one journal commit per directory,
// thousands of them); the first syncfs, which comes after every mkdir and
// before any rename, makes the new directories durable with the files.
func TestBatchCommitNewDirectoriesWithoutDirectoryFsyncs(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	var ids []slot.ID
	for _, wf := range []string{"a", "b"} {
		for _, at := range []string{"2024-01-01T01:00Z", "2024-01-02T01:00Z", "2024-01-03T01:00Z"} {
			ids = append(ids, slot.ID{Workflow: wf, Time: ts(at)})
		}
	}
	// dirsAtSync notes, at each syncfs, how many of the day directories exist.
	var dirsAtSync []int
	syncFS = func(fd int) error {
		n := 0
		for _, id := range ids {
			day, _ := slotPath(id.Time)
			if _, err := os.Stat(filepath.Join(dir, "state", id.Workflow, day)); err == nil {
				n++
			}
		}
		dirsAtSync = append(dirsAtSync, n)
		return unix.Syncfs(fd)
	}
	t.Cleanup(func() { syncFS = unix.Syncfs })
	syncs0 := db.dirSyncs.Load()
	var sts []slot.State
	for _, id := range ids {
		sts = append(sts, slot.State{ID: id, Status: slot.Ready})
	}
	if failed := db.PutStates(sts); failed != nil {
		t.Fatalf("PutStates: %v", failed)
	}
	if got := db.dirSyncs.Load() - syncs0; got != 0 {
		t.Errorf("PutStates of %d slots in new directories made %d directory fsyncs, want 0 (the syncfs covers them)", len(ids), got)
	}
	if d := cmp.Diff([]int{len(ids), len(ids)}, dirsAtSync); d != "" {
		t.Errorf("day directories present at each syncfs (-want +got):\n%s", d)
	}
	for _, id := range ids {
		day, file := slotPath(id.Time)
		if _, err := os.Stat(filepath.Join(dir, "state", id.Workflow, day, file)); err != nil {
			t.Error(err)
		}
	}
}

// TestPutStatesCommitsInChunks: PutStates writes a large step in batches
// of putStatesChunk states (two syncfs each), so that what a batch holds
// until it commits is bounded; a state refused in one chunk is reported
// and the others of every chunk are written.
func TestPutStatesCommitsInChunks(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	old := putStatesChunk
	putStatesChunk = 2
	t.Cleanup(func() { putStatesChunk = old })
	syncs := 0
	syncFS = func(fd int) error { syncs++; return unix.Syncfs(fd) }
	t.Cleanup(func() { syncFS = unix.Syncfs })
	var sts []slot.State
	for h := range 5 {
		sts = append(sts, slot.State{ID: slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z").Add(time.Duration(h) * time.Hour)}, Status: slot.Ready})
	}
	bad := sts[2].ID
	sts[2].Status = "BOGUS"
	failed := db.PutStates(sts)
	if len(failed) != 1 || failed[bad] == nil {
		t.Fatalf("PutStates failed %v, want only %s", failed, bad)
	}
	if syncs != 6 {
		t.Errorf("%d syncfs for 5 states in chunks of 2, want 6 (two per chunk)", syncs)
	}
	db2 := open(t, copyDir(t, dir))
	for i, st := range sts {
		got, found, err := db2.Get(st.ID)
		if i == 2 {
			if found || err != nil {
				t.Errorf("the refused state %s: found %v, err %v", st.ID, found, err)
			}
			continue
		}
		if err != nil || !found || got.Status != slot.Ready {
			t.Errorf("%s after reopening: %+v, found %v, err %v", st.ID, got, found, err)
		}
	}
}
