package statedb

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
)

// TestUnread: while a background load runs, Unread names the workflows it
// has not read yet (not those read on demand meanwhile); without one, and
// once it ended, nothing.
func TestUnread(t *testing.T) {
	_, db, wfs := reopenedWithFour(t)
	t1 := ts("2024-01-01T01:00Z")
	if got := db.Unread(wfs); got != nil || db.Loading() {
		t.Fatalf("Unread without a background load: %v (loading %v), want nil", got, db.Loading())
	}
	gate := make(chan struct{})
	preloadLoaded = func(string) { <-gate }
	t.Cleanup(func() { preloadLoaded = nil })
	done := db.LoadInBackground(wfs, 1)
	if _, _, err := db.Get(slot.ID{Workflow: "w3", Time: t1}); err != nil { // read on demand
		t.Fatal(err)
	}
	// "other" is not in memory either: a workflow the load does not list
	// counts as unread until the load ends (it is read on first use then).
	want := map[string]bool{"w1": true, "w2": true, "w4": true, "other": true}
	if diff := cmp.Diff(want, db.Unread(append(wfs, "other"))); diff != "" {
		t.Fatalf("Unread during the load (-want +got):\n%s", diff)
	}
	if !db.Loading() {
		t.Fatal("Loading during the load: false")
	}
	gate <- struct{}{} // w1 installed
	deadline := time.Now().Add(30 * time.Second)
	for !db.Loaded("w1") {
		if time.Now().After(deadline) {
			t.Fatal("w1 not installed after the gate opened")
		}
		time.Sleep(time.Millisecond)
	}
	if got := db.Unread([]string{"w1", "w2"}); !cmp.Equal(got, map[string]bool{"w2": true}) {
		t.Fatalf("Unread after w1 was read: %v, want w2", got)
	}
	close(gate)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the background load did not end")
	}
	if got := db.Unread(wfs); got != nil || db.Loading() {
		t.Fatalf("Unread after the load: %v (loading %v), want nil", got, db.Loading())
	}
}

// TestLoadInBackgroundAfterReload: a Reload during a background load makes
// that load install nothing (it read before the Reload); a LoadInBackground
// after it starts a new load instead of answering the old one's channel,
// and the new load reads everything again. The old load stops reading.
func TestLoadInBackgroundAfterReload(t *testing.T) {
	_, db, wfs := reopenedWithFour(t)
	gate := make(chan struct{})
	var reads atomic.Int32
	preloadLoaded = func(string) { reads.Add(1); <-gate }
	t.Cleanup(func() { preloadLoaded = nil })
	old := db.LoadInBackground(wfs, 1)
	if err := db.Reload(); err != nil {
		t.Fatal(err)
	}
	fresh := db.LoadInBackground(wfs, 2)
	if fresh == old {
		t.Fatal("LoadInBackground after a Reload answered the load started before it, which installs nothing")
	}
	close(gate)
	for _, ch := range []<-chan struct{}{old, fresh} {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatal("a background load did not end")
		}
	}
	for _, wf := range wfs {
		if !db.Loaded(wf) {
			t.Errorf("%s not read by the load started after the Reload", wf)
		}
	}
	if got := db.Unread(wfs); got != nil {
		t.Errorf("Unread after both loads ended: %v, want nil", got)
	}
	// The old load (one reader) read at most w1 (if it began before the
	// Reload) and then nothing more; the new one read the 4.
	if got := reads.Load(); got < 4 || got > 5 {
		t.Errorf("%d workflows read by the two loads, want 4 or 5: the load made stale by the Reload read on", got)
	}
}

// reopenedWithFour returns a database in a new directory holding one
// SUCCESS slot of each of four workflows, closed and opened again as after
// a restart (nothing read yet), and those workflows.
func reopenedWithFour(t *testing.T) (string, *DB, []string) {
	t.Helper()
	dir := t.TempDir()
	db := open(t, dir)
	wfs := []string{"w1", "w2", "w3", "w4"}
	t1 := ts("2024-01-01T01:00Z")
	for _, wf := range wfs {
		if err := db.Put(slot.State{ID: slot.ID{Workflow: wf, Time: t1}, Status: slot.Success}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	return dir, open(t, dir), wfs
}
