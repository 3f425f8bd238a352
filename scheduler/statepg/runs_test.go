package statepg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/store"
)

// TestRuns: a workflow's record of submissions is replaced whole, kept to
// the millisecond (rounded up, never earlier), one row per attempt (the
// later time), read by another instance at once (no Refresh), and a
// fenced workflow's record is refused alone.
func TestRuns(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	if got, err := b.Runs("wf"); err != nil || got != nil {
		t.Fatalf("Runs of a workflow without a record: %v, %v", got, err)
	}
	first := []store.Run{
		{Slot: at("2026-11-24T00:00:00Z"), Attempt: 0, At: at("2026-11-24T03:00:30.0001Z")},
		{Slot: at("2026-11-24T01:00:00Z"), Attempt: 0, At: at("2026-11-24T07:00:30Z")},
		{Slot: at("2026-11-24T01:00:00Z"), Attempt: 0, At: at("2026-11-24T07:05:00Z")},
	}
	if failed := a.PutRuns(map[string][]store.Run{"wf": first, "other": first[:1]}); failed != nil {
		t.Fatal(failed)
	}
	want := []store.Run{
		{Slot: at("2026-11-24T00:00:00Z"), Attempt: 0, At: at("2026-11-24T03:00:30.001Z")},
		{Slot: at("2026-11-24T01:00:00Z"), Attempt: 0, At: at("2026-11-24T07:05:00Z")},
	}
	got, err := b.Runs("wf")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("runs read by another instance (-want +got):\n%s", d)
	}
	// Replaced whole: the first run aged out.
	if failed := a.PutRuns(map[string][]store.Run{"wf": want[1:]}); failed != nil {
		t.Fatal(failed)
	}
	if got, _ := b.Runs("wf"); !cmp.Equal(want[1:], got) {
		t.Fatalf("after replacing: %v", got)
	}
	if got, _ := b.Runs("other"); len(got) != 1 {
		t.Fatalf("another workflow's record changed: %v", got)
	}
	// Many workflows' records in one read: only those that have one.
	many, err := b.RunsOf([]string{"wf", "other", "none"})
	if err != nil {
		t.Fatal(err)
	}
	wantMany := map[string][]store.Run{"wf": want[1:], "other": want[:1]}
	if d := cmp.Diff(wantMany, many); d != "" {
		t.Fatalf("RunsOf (-want +got):\n%s", d)
	}
	if _, err := b.RunsOf([]string{"wf", "bad/name"}); !errors.Is(err, store.ErrBadName) {
		t.Fatalf("RunsOf with a bad workflow name: %v", err)
	}

	fenced, err := Open(context.Background(), dsn, Options{Fence: &fakeFence{refuse: map[string]bool{"lost": true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer fenced.Close()
	failed := fenced.PutRuns(map[string][]store.Run{"wf": nil, "lost": want})
	if len(failed) != 1 || !errors.Is(failed["lost"], ErrFenced) {
		t.Fatalf("failed: %v", failed)
	}
	if got, _ := b.Runs("wf"); got != nil {
		t.Fatalf("the unfenced workflow's record was not emptied: %v", got)
	}
	if got, _ := b.Runs("lost"); got != nil {
		t.Fatalf("the fenced workflow's record was written: %v", got)
	}
	if failed := a.PutRuns(map[string][]store.Run{"bad/name": want}); failed == nil || !errors.Is(failed["bad/name"], store.ErrBadName) {
		t.Fatalf("a bad workflow name: %v", failed)
	}
	a.Close()
	if failed := a.PutRuns(map[string][]store.Run{"wf": want}); !errors.Is(failed["wf"], errClosed) {
		t.Fatalf("on a closed store: %v", failed)
	}
	if _, err := a.Runs("wf"); !errors.Is(err, errClosed) {
		t.Fatalf("Runs on a closed store: %v", err)
	}
}
