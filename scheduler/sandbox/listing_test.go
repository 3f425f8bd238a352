package sandbox

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/faultstore"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow/testcase"
)

// TestCaseFailsWhenItsSlotsCannotBeListed: a case whose slots cannot be
// listed (its state database fails a read) fails naming the error; the
// listing's error was skipped, so the slot looked finished and the case
// went on as if it had nothing to wait for.
func TestCaseFailsWhenItsSlotsCannotBeListed(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "p", w)
	db, err := statedb.OpenWith(filepath.Join(t.TempDir(), "db"), statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bad := slot.ID{Workflow: "wf", Time: w.StartTime.Add(time.Hour)}
	eng, err := engine.New(engine.Options{WorkflowsDir: wdir, Store: faultstore.EIO{DB: db, Bad: bad}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := &testcase.Case{Name: "c", Start: w.StartTime, End: w.StartTime.Add(3 * time.Hour)}
	s := &sandboxCase{r: &runner{opts: Options{Poll: time.Millisecond}}, c: c, res: &Result{}, eng: eng, ids: []string{"wf"}, types: map[string]string{}}
	err = s.drive(context.Background())
	if err == nil || !strings.Contains(err.Error(), bad.String()) {
		t.Errorf("drive: %v, want the listing's error naming %s", err, bad)
	}
	if got := s.pending(); !strings.Contains(got, "cannot be listed") {
		t.Errorf("pending() = %q, want that the slots cannot be listed", got)
	}
	if got := s.notSuccessful(); !strings.Contains(got, "cannot be listed") {
		t.Errorf("notSuccessful() = %q, want that the slots cannot be listed", got)
	}
}
