package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
)

// TestSlotsListsUnreadableSlots: a slot whose record does not parse (a
// torn file, a directory or a FIFO in place of the file) is in the
// listing, in its place, marked unreadable with why (naming the file,
// never its content), not left out: a backfill of the range (celos rerun
// --from --to) reruns it, a listing shows it. Real state database.
func TestSlotsListsUnreadableSlots(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	r := newRig(t, nil, w)
	now := ts("2024-01-01T04:30Z")
	r.step(now)
	day := filepath.Join(r.ddir, "state", "wf", "2024-01-01")
	if err := os.WriteFile(filepath.Join(day, "01:00:00.000Z"), []byte(`{"status":"SECRET-CONTENT`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(day, "02:00:00.000Z")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(day, "02:00:00.000Z"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(day, "03:00:00.000Z")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(day, "03:00:00.000Z"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.db.(*statedb.DB).Reload(); err != nil {
		t.Fatal(err)
	}
	got, err := r.e.Slots(context.Background(), "wf", w.StartTime, now)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range got {
		line := slot.FormatTime(s.ID.Time) + " " + string(s.Status)
		if s.Unreadable != nil {
			line += "unreadable"
			if !errors.Is(s.Unreadable, scheduler.ErrSlotUnreadable) || strings.Contains(s.Unreadable.Error(), "SECRET") ||
				!strings.Contains(s.Unreadable.Error(), day) {
				t.Errorf("%s: unreadable %q: want ErrSlotUnreadable naming the file in %s, without its content", s.ID, s.Unreadable, day)
			}
		}
		lines = append(lines, line)
	}
	want := []string{
		"2024-01-01T04:00:00.000Z READY",
		"2024-01-01T03:00:00.000Z unreadable",
		"2024-01-01T02:00:00.000Z unreadable",
		"2024-01-01T01:00:00.000Z unreadable",
		"2024-01-01T00:00:00.000Z READY",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Fatalf("Slots (-want +got):\n%s", d)
	}
	// A rerun rewrites an unreadable slot; it then lists as any other.
	if err := r.e.Rerun(context.Background(), slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}, now); err != nil {
		t.Fatal(err)
	}
	got, err = r.e.Slots(context.Background(), "wf", ts("2024-01-01T01:00Z"), ts("2024-01-01T01:00:01Z"))
	if err != nil || len(got) != 1 || got[0].Unreadable != nil || got[0].Status != slot.Waiting {
		t.Fatalf("after a rerun: %+v, %v; want WAITING", got, err)
	}
}

// failingGets is a store whose Get of one slot fails as a read does (an
// I/O error, a database server gone), not with a record that does not
// parse.
type failingGets struct {
	*memStore
	bad slot.ID
}

var errIO = fmt.Errorf("read state: %w", syscall.EIO)

func (f failingGets) Get(id slot.ID) (slot.State, bool, error) {
	if id.Workflow == f.bad.Workflow && id.Time.Equal(f.bad.Time) {
		return slot.State{}, false, errIO
	}
	return f.memStore.Get(id)
}

// TestSlotsFailsOnAReadError: a read of one slot that fails for another
// reason than a record that does not parse fails the listing, naming the
// slot: never a partial list that looks complete.
func TestSlotsFailsOnAReadError(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "p", w)
	bad := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	e, err := New(Options{WorkflowsDir: wdir, Store: failingGets{newMemStore(), bad}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Slots(context.Background(), "wf", w.StartTime, ts("2024-01-01T04:30Z"))
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), bad.String()) {
		t.Fatalf("Slots: %d slots, error %v; want the read error, naming %s", len(got), err, bad)
	}
	if errors.Is(err, scheduler.ErrSlotUnreadable) {
		t.Errorf("a read error is not an unreadable record: %v", err)
	}
}
