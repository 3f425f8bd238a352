package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// TestRerunRangeUnreadableSlotWhoseJobRuns: a backfill over a slot whose
// state file cannot be read while the job the lost record named still
// runs lists the slot as unreadable and skipped, with the server's reason
// (its job runs and would run on beside the rerun: kill it first), in the
// dry run too; the job runs on. Real engine, state database and command
// service.
func TestRerunRangeUnreadableSlotWhoseJobRuns(t *testing.T) {
	dir := t.TempDir()
	wfDir, dbDir := filepath.Join(dir, "workflows"), filepath.Join(dir, "db")
	w := fixture.Hourly("wf")
	w.StartTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w.ExternalService.Command = []string{"sleep", "60"}
	fixture.WriteProject(t, wfDir, "p", w)
	now := time.Date(2024, 1, 1, 0, 30, 0, 0, time.UTC)
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := command.New(filepath.Join(dir, "jobs"), command.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: db,
		Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	id := slot.ID{Workflow: "wf", Time: w.StartTime}
	ext := ""
	for i := 0; i < 5 && ext == ""; i++ {
		if err := eng.Step(context.Background(), now, nil); err != nil {
			t.Fatal(err)
		}
		if st, _, _ := db.Get(id); st.Status == slot.Running {
			ext = st.ExternalID
		}
	}
	if ext == "" {
		t.Fatal("the slot did not start")
	}
	t.Cleanup(func() { svc.Kill(context.Background(), &w, ext) })
	if err := os.WriteFile(filepath.Join(dbDir, "state", "wf", "2024-01-01", "00:00:00.000Z"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := db.Reload(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(eng, api.Options{Now: func() time.Time { return now }}))
	t.Cleanup(srv.Close)

	for _, dry := range []bool{true, false} {
		args := []string{"rerun", "--server", srv.URL, "--id", "wf", "--from", "2024-01-01T00:00Z", "--to", "2024-01-01T00:00Z", "--json"}
		if dry {
			args = append(args, "--dry-run")
		}
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, out.String(), errb.String())
		}
		var rows []backfillRow
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		if len(rows) != 1 || rows[0].Unreadable == "" || rows[0].Status != "" || rows[0].Action != "skipped" ||
			!strings.Contains(rows[0].Error, "kill the slot first") || !strings.Contains(rows[0].Error, ext) {
			t.Errorf("dry run %v: rows %+v; want the slot unreadable, skipped (its job runs) naming job %s", dry, rows, ext)
		}
	}
	if js, err := svc.Status(context.Background(), &w, ext); err != nil || !js.Running {
		t.Errorf("the slot's job: %+v, %v; want it running still", js, err)
	}
}
