package statepg

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/store"
)

// TestWriteOwners: 1,000 records set and one removed cost one transaction
// (a constant number of round trips), a removal of a missing record and
// of one also set are no error, bad names are refused by name, and
// another instance reads the result.
func TestWriteOwners(t *testing.T) {
	db, dsn := openTest(t)
	if err := db.SetOwner("old", store.Owner{Project: "p", File: "p.json"}); err != nil {
		t.Fatal(err)
	}
	set := map[string]store.Owner{"a/b": {Project: "p", File: "p.json"}, "kept": {Project: "q", File: "q.json"}}
	want := map[string]store.Owner{"kept": {Project: "q", File: "q.json"}}
	for i := range 1000 {
		wf := fmt.Sprintf("wf-%04d", i)
		set[wf] = store.Owner{Project: "p", File: "p.json"}
		want[wf] = set[wf]
	}
	q0 := db.Queries()
	failed := db.WriteOwners(set, []string{"old", "missing", "kept"})
	if len(failed) != 1 || !errors.Is(failed["a/b"], store.ErrBadName) {
		t.Fatalf("failed: %v", failed)
	}
	if q := db.Queries() - q0; q > 6 {
		t.Fatalf("WriteOwners of 1,000 records took %d round trips, want one transaction (at most 6)", q)
	}
	got, err := openDSN(t, dsn).Owners()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("owners read by another instance (-want +got):\n%s", d)
	}
	if failed := db.WriteOwners(nil, nil); failed != nil {
		t.Fatalf("an empty WriteOwners: %v", failed)
	}
}

// TestWriteOwnersFenced: when the fence refuses one workflow of the batch,
// only its record is refused (ErrFenced); the others are written.
func TestWriteOwnersFenced(t *testing.T) {
	_, dsn := openTest(t)
	db, err := Open(context.Background(), dsn, Options{Fence: &fakeFence{refuse: map[string]bool{"lost": true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	failed := db.WriteOwners(map[string]store.Owner{
		"kept": {Project: "p", File: "p.json"},
		"lost": {Project: "p", File: "p.json"},
	}, []string{"also-kept"})
	if len(failed) != 1 || !errors.Is(failed["lost"], ErrFenced) {
		t.Fatalf("failed: %v", failed)
	}
	got, err := db.Owners()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]store.Owner{"kept": {Project: "p", File: "p.json"}}, got); d != "" {
		t.Fatalf("owners (-want +got):\n%s", d)
	}
}

// TestWriteOwnersServerDown: a batch that cannot commit fails every record
// of it, each with the error, and writes nothing.
func TestWriteOwnersServerDown(t *testing.T) {
	db, _ := openTest(t)
	db.Close()
	failed := db.WriteOwners(map[string]store.Owner{"a": {Project: "p", File: "f"}}, []string{"b"})
	if len(failed) != 2 || !errors.Is(failed["a"], errClosed) || !errors.Is(failed["b"], errClosed) {
		t.Fatalf("failed: %v", failed)
	}
}
