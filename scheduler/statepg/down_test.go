package statepg

import (
	"context"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/slot"
)

// TestServerDownAndBack: while PostgreSQL is down, the workflows already
// loaded are still read from memory, writes fail (each within the connect
// timeout) and leave the index as it was, and reads of workflows not
// loaded fail at once after the first failure; once the server is back,
// writes go through again and nothing written before is lost.
func TestServerDownAndBack(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx := context.Background()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE celos"); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, srv.DSN("celos"), Options{ConnectTimeout: 2 * time.Second, OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Put(slot.State{ID: sid("w", 0), Status: slot.Ready}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	if st, ok, err := db.Get(sid("w", 0)); err != nil || !ok || st.Status != slot.Ready {
		t.Fatalf("a loaded workflow while the server is down: %v %v %v", st, ok, err)
	}
	done := make(chan error, 1)
	go func() { done <- db.Put(slot.State{ID: sid("w", 0), Status: slot.Running, ExternalID: "j"}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a write succeeded with the server down")
		}
		t.Log(err)
	case <-time.After(2 * time.Minute):
		t.Fatal("a write did not return with the server down")
	}
	if st, _, _ := db.Get(sid("w", 0)); st.Status != slot.Ready {
		t.Fatalf("the failed write changed the index: %v", st)
	}
	if _, _, err := db.Get(sid("other", 0)); err == nil {
		t.Fatal("a workflow not loaded was read with the server down")
	}
	// The next reads of workflows not loaded fail at once: a step over
	// many of them does not wait for the database once per workflow.
	failed := 0
	for i := range 200 {
		if _, err := db.Active(string(rune('a'+i%26)) + "x"); err != nil {
			failed++
		}
	}
	if failed != 200 {
		t.Fatalf("%d of 200 reads failed", failed)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var perr error
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if perr = db.Put(slot.State{ID: sid("w", 0), Status: slot.Running, ExternalID: "j"}); perr == nil {
			break
		}
	}
	if perr != nil {
		t.Fatalf("writes do not resume once the server is back: %v", perr)
	}
	other := openDSN(t, srv.DSN("celos"))
	if st, _, err := other.Get(sid("w", 0)); err != nil || st.Status != slot.Running || st.ExternalID != "j" {
		t.Fatalf("after the restart the database holds %v (%v)", st, err)
	}
	// Reads of workflows not loaded resume too (after loadBackoff at most).
	var rerr error
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if _, _, rerr = db.Get(sid("other", 0)); rerr == nil {
			break
		}
	}
	if rerr != nil {
		t.Fatalf("reads do not resume: %v", rerr)
	}
}
