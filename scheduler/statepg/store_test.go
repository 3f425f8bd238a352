package statepg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func sid(wf string, h int) slot.ID {
	return slot.ID{Workflow: wf, Time: t0.Add(time.Duration(h) * time.Hour)}
}

func TestRegisters(t *testing.T) {
	db, _ := openTest(t)
	val := json.RawMessage(`{ "b": 1,  "a": [true, null, "é"] }`)
	for _, k := range []string{"k2", "k1", "K", "x"} {
		if err := db.PutRegister("bkt", k, val); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.GetRegister("bkt", "k1")
	if err != nil || string(got) != string(val) {
		t.Fatalf("GetRegister = %s, %v; want the value byte for byte", got, err)
	}
	keys, err := db.RegisterKeys("bkt", "k")
	if d := cmp.Diff([]string{"k1", "k2"}, keys); d != "" || err != nil {
		t.Fatalf("keys with prefix k: %v %s", err, d)
	}
	keys, _ = db.RegisterKeys("bkt", "")
	if d := cmp.Diff([]string{"K", "k1", "k2", "x"}, keys); d != "" {
		t.Fatalf("all keys, byte order: %s", d)
	}
	if keys, err := db.RegisterKeys("none", ""); err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("unknown bucket: %v %v", keys, err)
	}
	if err := db.DeleteRegistersWithPrefix("bkt", "k"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRegister("bkt", "x"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRegister("bkt", "x"); err != nil {
		t.Fatalf("deleting a missing register: %v", err)
	}
	keys, _ = db.RegisterKeys("bkt", "")
	if d := cmp.Diff([]string{"K"}, keys); d != "" {
		t.Fatal(d)
	}
	if _, err := db.GetRegister("bkt", "k1"); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "bkt/k1") {
		t.Fatalf("want ErrNotFound naming bkt/k1, got %v", err)
	}
	// The prefix is not a pattern.
	db.PutRegister("bkt", "a_b", val)
	db.PutRegister("bkt", "axb", val)
	if keys, _ := db.RegisterKeys("bkt", "a_"); len(keys) != 1 {
		t.Fatalf("prefix a_ matched %v", keys)
	}
}

// TestBadInput: names and values the store cannot keep are refused with
// store.ErrBadName (or a clear error) before anything is written.
func TestBadInput(t *testing.T) {
	db, _ := openTest(t)
	bad := []string{"", ".hidden", "a/b", "a\\b", "a\x00b", "a\nb", "\xff\xfe", strings.Repeat("x", 256)}
	for _, wf := range bad {
		if _, _, err := db.Get(slot.ID{Workflow: wf, Time: t0}); !errors.Is(err, store.ErrBadName) {
			t.Errorf("Get(%q): %v", wf, err)
		}
		if err := db.Put(slot.State{ID: slot.ID{Workflow: wf, Time: t0}, Status: slot.Waiting}); !errors.Is(err, store.ErrBadName) {
			t.Errorf("Put(%q): %v", wf, err)
		}
		if err := db.SetPaused(wf, true); !errors.Is(err, store.ErrBadName) {
			t.Errorf("SetPaused(%q): %v", wf, err)
		}
		if err := db.MarkRerun(slot.ID{Workflow: wf, Time: t0}, t0); !errors.Is(err, store.ErrBadName) {
			t.Errorf("MarkRerun(%q): %v", wf, err)
		}
		if err := db.PutRegister(wf, "k", json.RawMessage("1")); !errors.Is(err, store.ErrBadName) {
			t.Errorf("PutRegister(%q): %v", wf, err)
		}
		if err := db.PutRegister("b", wf, json.RawMessage("1")); !errors.Is(err, store.ErrBadName) {
			t.Errorf("PutRegister key %q: %v", wf, err)
		}
	}
	for _, v := range []string{"", "{", "\"\xff\""} { // "\u0000" is text: storetest
		if err := db.PutRegister("b", "k", json.RawMessage(v)); !errors.Is(err, store.ErrBadName) {
			t.Errorf("PutRegister value %q: %v", v, err)
		}
	}
	for _, st := range []slot.State{
		{ID: sid("w", 0), Status: "BOGUS"},
		{ID: sid("w", 0), Status: slot.Running, RetryCount: -1},
		{ID: sid("w", 0), Status: slot.Running, ExternalID: "a\x00b"},
		{ID: sid("w", 0), Status: slot.Running, ExternalID: "\xff"},
	} {
		if err := db.Put(st); err == nil {
			t.Errorf("Put(%+v) succeeded", st)
		}
	}
	if _, err := db.RegisterKeys("b", "a.b"); !errors.Is(err, store.ErrBadName) {
		t.Errorf("prefix with a dot: %v", err)
	}
	if n, err := db.Workflows(); err != nil || len(n) != 0 {
		t.Fatalf("something was written: %v %v", n, err)
	}
}

// TestAnotherInstanceWrites: an instance's index follows its own writes
// without reading, and sees another instance's writes after Refresh (a
// write of its own to a workflow another instance wrote meanwhile drops
// that workflow's index instead of trusting it).
func TestAnotherInstanceWrites(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Put(slot.State{ID: sid("w", 0), Status: slot.Waiting}))
	must(a.Put(slot.State{ID: sid("v", 0), Status: slot.Waiting}))
	if st, _, _ := b.Get(sid("w", 0)); st.Status != slot.Waiting {
		t.Fatalf("b reads %v", st)
	}
	reads := a.Stats().Reads
	must(a.Put(slot.State{ID: sid("w", 0), Status: slot.Ready}))
	if st, _, _ := a.Get(sid("w", 0)); st.Status != slot.Ready || a.Stats().Reads != reads {
		t.Fatalf("a's own write: %v, %d rows read", st, a.Stats().Reads-reads)
	}
	// b's index is stale until it refreshes.
	if st, _, _ := b.Get(sid("w", 0)); st.Status != slot.Waiting {
		t.Fatalf("b reads %v before Refresh", st)
	}
	n, err := b.Refresh(context.Background())
	must(err)
	if n != 1 {
		t.Fatalf("Refresh dropped %d indexes, want 1 (w)", n)
	}
	if st, _, _ := b.Get(sid("w", 0)); st.Status != slot.Ready {
		t.Fatalf("b reads %v after Refresh", st)
	}
	// b writes w; a's next write to w sees the version jump and drops its
	// index: a then reads both writes.
	must(b.Put(slot.State{ID: sid("w", 1), Status: slot.Running, ExternalID: "j"}))
	must(a.Put(slot.State{ID: sid("w", 2), Status: slot.Waiting}))
	act, err := a.Active("w")
	must(err)
	if len(act) != 3 {
		t.Fatalf("a's active slots of w: %v", act)
	}
	must(b.SetPaused("v", true))
	if a.Paused("v") {
		t.Fatal("a sees the pause before Refresh")
	}
	_, err = a.Refresh(context.Background())
	must(err)
	if !a.Paused("v") {
		t.Fatal("a does not see b's pause after Refresh")
	}
}

// fakeFence refuses the workflows in refuse and locks nothing.
type fakeFence struct {
	refuse map[string]bool
	checks int
}

func (f *fakeFence) Check(ctx context.Context, tx pgx.Tx, wfs []string) error {
	f.checks++
	for _, wf := range wfs {
		if f.refuse[wf] {
			return fmt.Errorf("%w: workflow %s", ErrFenced, wf)
		}
	}
	return nil
}

// TestFence: every write transaction asks the fence; a refused write
// commits nothing, is reported per slot with ErrFenced and counted; in a
// step's batch only the fenced workflow's states are refused.
func TestFence(t *testing.T) {
	_, dsn := openTest(t)
	f := &fakeFence{refuse: map[string]bool{"lost": true}}
	ctx := context.Background()
	db, err := Open(ctx, dsn, Options{Fence: f})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	failed := db.PutStates([]slot.State{
		{ID: sid("kept", 0), Status: slot.Ready},
		{ID: sid("lost", 0), Status: slot.Ready},
		{ID: sid("lost", 1), Status: slot.Ready},
	})
	if len(failed) != 2 || !errors.Is(failed[sid("lost", 0)], ErrFenced) || !errors.Is(failed[sid("lost", 1)], ErrFenced) {
		t.Fatalf("failed: %v", failed)
	}
	writes := map[string]error{
		"Put":         db.Put(slot.State{ID: sid("lost", 2), Status: slot.Ready}),
		"MarkRerun":   db.MarkRerun(sid("lost", 0), t0),
		"SetPaused":   db.SetPaused("lost", true),
		"SetOwner":    db.SetOwner("lost", store.Owner{Project: "p", File: "f"}),
		"DeleteOwner": db.DeleteOwner("lost"),
		"PutIntents":  db.PutIntents(map[slot.ID]store.Intent{sid("lost", 0): {Attempt: 0, Time: t0}})[sid("lost", 0)],
	}
	for op, err := range writes {
		if !errors.Is(err, ErrFenced) {
			t.Errorf("%s: want ErrFenced, got %v", op, err)
		}
	}
	if got := db.FencedWrites(); got != int64(2+len(writes)) { // the batch, its retry of "lost", and each write
		t.Errorf("FencedWrites = %d, want %d", got, 2+len(writes))
	}
	other := openDSN(t, dsn)
	wfs, _ := other.Workflows()
	if d := cmp.Diff([]string{"kept"}, wfs); d != "" {
		t.Fatalf("a fenced write left rows: %s", d)
	}
	if st, ok, _ := other.Get(sid("kept", 0)); !ok || st.Status != slot.Ready {
		t.Fatalf("the unfenced workflow's state was not written: %v", st)
	}
	if st, ok, _ := db.Get(sid("lost", 0)); ok {
		t.Fatalf("the index holds a refused write: %v", st)
	}
}

// TestPrune deletes final slots and intents older than the limit and
// expired markers of final slots, keeps the rest, in the index and the
// database alike.
func TestPrune(t *testing.T) {
	db, dsn := openTest(t)
	now := t0.Add(60 * 24 * time.Hour)
	old := now.Add(-30 * 24 * time.Hour)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []slot.State{
		{ID: slot.ID{Workflow: "w", Time: old}, Status: slot.Success},
		{ID: slot.ID{Workflow: "w", Time: old.Add(time.Hour)}, Status: slot.Running, ExternalID: "j"},
		{ID: slot.ID{Workflow: "w", Time: now.Add(-time.Hour)}, Status: slot.Failure},
	} {
		must(db.Put(st))
	}
	must(db.MarkRerun(slot.ID{Workflow: "w", Time: old}, old))
	must(db.MarkRerun(slot.ID{Workflow: "w", Time: old.Add(time.Hour)}, old))
	must(db.PutIntent(slot.ID{Workflow: "w", Time: old}, store.Intent{Time: old}))
	if _, err := db.Prune(now.Add(-time.Hour), now); err == nil {
		t.Fatal("a limit inside the window was accepted")
	}
	n, err := db.Prune(now.Add(-10*24*time.Hour), now)
	must(err)
	if n != 1 {
		t.Fatalf("pruned %d slot states, want 1", n)
	}
	snap := func(db *DB) string {
		sts, _ := db.Range("w", t0, now)
		marks, _ := db.RerunMarks("w")
		_, in, _ := db.GetIntent(slot.ID{Workflow: "w", Time: old})
		return fmt.Sprint(sts, marks, in)
	}
	want := fmt.Sprint([]slot.State{
		{ID: slot.ID{Workflow: "w", Time: old.Add(time.Hour)}, Status: slot.Running, ExternalID: "j"},
		{ID: slot.ID{Workflow: "w", Time: now.Add(-time.Hour)}, Status: slot.Failure},
	}, []store.RerunMark{{Slot: old.Add(time.Hour), At: old}}, false)
	if d := cmp.Diff(want, snap(db)); d != "" {
		t.Fatalf("index: %s", d)
	}
	if d := cmp.Diff(want, snap(openDSN(t, dsn))); d != "" {
		t.Fatalf("database: %s", d)
	}
}

// TestPruneKeepsTheIntentOfASubmissionInFlight: as statedb's, on
// PostgreSQL: the intent of an old READY slot survives a prune (in the
// index and in the database), the intent of a final one goes.
func TestPruneKeepsTheIntentOfASubmissionInFlight(t *testing.T) {
	db, dsn := openTest(t)
	now := t0.Add(60 * 24 * time.Hour)
	ready := slot.ID{Workflow: "w", Time: now.Add(-30 * 24 * time.Hour)}
	done := slot.ID{Workflow: "w", Time: ready.Time.Add(time.Hour)}
	for _, st := range []slot.State{{ID: ready, Status: slot.Ready}, {ID: done, Status: slot.Success}} {
		if err := db.Put(st); err != nil {
			t.Fatal(err)
		}
		if err := db.PutIntent(st.ID, store.Intent{Time: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Prune(now.Add(-10*24*time.Hour), now); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*DB{"index": db, "database": openDSN(t, dsn)} {
		if _, left, err := d.GetIntent(ready); err != nil || !left {
			t.Errorf("%s: the intent of the READY slot was pruned (%v)", name, err)
		}
		if _, left, err := d.GetIntent(done); err != nil || left {
			t.Errorf("%s: the intent of the SUCCESS slot was kept (%v)", name, err)
		}
	}
}

// TestHasRegister: HasRegister answers as RegisterKeys lists (as the file
// store's does), in one round trip whatever the bucket holds.
func TestHasRegister(t *testing.T) {
	db, _ := openTest(t)
	for i := 0; i < 500; i++ {
		if err := db.PutRegister("bkt", fmt.Sprintf("k-%03d", i), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := db.RegisterKeys("bkt", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k-000", "k-499", "k-500", "K-000", "k-", "", ".hidden", "a/b", "bad\x01name", strings.Repeat("k", 300)} {
		q0 := db.Queries()
		got, err := db.HasRegister("bkt", key)
		if want := slices.Contains(listed, key); got != want || err != nil {
			t.Errorf("HasRegister(bkt, %q) = %v, %v; the listing says %v", key, got, err, want)
		}
		if n := db.Queries() - q0; n > 1 {
			t.Errorf("HasRegister(bkt, %q): %d round trips, want at most 1", key, n)
		}
	}
	if got, err := db.HasRegister("none", "k-000"); got || err != nil {
		t.Errorf("unknown bucket: %v, %v", got, err)
	}
	if _, err := db.HasRegister("a/b", "k-000"); !errors.Is(err, store.ErrBadName) {
		t.Errorf("bad bucket: %v", err)
	}
}
