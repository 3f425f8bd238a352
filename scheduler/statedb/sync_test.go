package statedb

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
