package ui

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// TestUnreadableSlotDetails: the details of a slot whose state file
// cannot be read (here a FIFO; the engine's Slots leaves such slots out)
// say so, naming the file, with 409 as the API's /slot-state does: not
// "has no slot at", which sends the operator looking for a schedule
// problem. Real engine and state database.
func TestUnreadableSlotDetails(t *testing.T) {
	dir := t.TempDir()
	wfDir, dbDir := filepath.Join(dir, "workflows"), filepath.Join(dir, "db")
	if err := os.MkdirAll(wfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 13, 20, 0, 0, time.UTC)
	w := fixture.Hourly("wf")
	w.ExternalService = fixture.Command("true")
	w.StartTime = now.Add(-6 * time.Hour).Truncate(time.Hour)
	fixture.Write(t, wfDir, fixture.Project("p", w))
	fifoTime := now.Add(-2 * time.Hour).Truncate(time.Hour)
	p := filepath.Join(dbDir, "state", "wf", fifoTime.Format("2006-01-02"), fifoTime.Format("15:04:05.000Z"))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := statedb.OpenWith(dbDir, statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: db, Services: map[string]external.Service{}, FS: trigger.NewMux("")})
	if err != nil {
		t.Fatal(err)
	}
	noLog := func(context.Context, *workflow.Workflow, slot.State) (io.ReadCloser, error) {
		return nil, fs.ErrNotExist
	}
	h, err := New(eng, Options{Now: func() time.Time { return now }, SlotLog: noLog})
	if err != nil {
		t.Fatal(err)
	}
	ft := slot.FormatTime(fifoTime)
	for _, target := range []string{"/ui/slot?id=wf&time=" + ft, "/ui/log?id=wf&time=" + ft} {
		rec := get(t, h, target)
		body := rec.Body.String()
		if rec.Code != 409 || !strings.Contains(body, p) || !strings.Contains(body, "named pipe") {
			t.Errorf("GET %s: %d, want 409 naming %s as a named pipe; body:\n%s", target, rec.Code, p, body)
		}
	}
	// A time that is no slot is still 404.
	rec := get(t, h, "/ui/slot?id=wf&time="+slot.FormatTime(fifoTime.Add(time.Minute)))
	if rec.Code != 404 {
		t.Errorf("a time that is no slot: %d, want 404", rec.Code)
	}
}
