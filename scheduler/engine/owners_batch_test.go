package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// TestNewWorkflowsOwnersInOneTransaction: the start and first step over
// 100 new workflows on PostgreSQL records their 100 owners in one transaction
// (not one each: 10,000 new workflows were 10,000 transactions), and the
// step that follows the removal of 50 of them removes their records in one
// more.
func TestNewWorkflowsOwnersInOneTransaction(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE owners"); err != nil {
		t.Fatal(err)
	}
	pg, err := statepg.Open(ctx, srv.DSN("owners"), statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	var first, second []workflow.Workflow
	want := make(map[string]store.Owner)
	for i := range 100 {
		w := fixture.Hourly(fmt.Sprintf("wf-%03d", i))
		if i < 50 {
			first = append(first, w)
			want[w.ID] = store.Owner{Project: "first", File: "first.json"}
		} else {
			second = append(second, w)
		}
	}
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "first", first...)
	fixture.WriteProject(t, wdir, "second", second...)
	// The engine loads the workflows (and records their owners) when it
	// starts, then steps.
	q0 := pg.Queries()
	e, err := New(Options{WorkflowsDir: wdir, Store: pg, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	now := ts("2024-01-01T00:30Z")
	if err := e.Step(ctx, now, nil); err != nil {
		t.Fatal(err)
	}
	if q := pg.Queries() - q0; q > 40 {
		t.Fatalf("the start and first step over 100 new workflows took %d round trips, want at most 40 (the owners in one transaction)", q)
	}
	owners, err := pg.Owners()
	if err != nil || len(owners) != 100 {
		t.Fatalf("%d owner records after the first step, %v", len(owners), err)
	}
	// Undeploy the second project: its 50 records go in one transaction.
	if err := os.Remove(filepath.Join(wdir, "second.json")); err != nil {
		t.Fatal(err)
	}
	q0 = pg.Queries()
	if err := e.Step(ctx, now, nil); err != nil {
		t.Fatal(err)
	}
	if q := pg.Queries() - q0; q > 25 {
		t.Fatalf("the step removing 50 owner records took %d round trips, want at most 25", q)
	}
	owners, err = pg.Owners()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, owners); d != "" {
		t.Fatalf("owner records after the undeploy (-want +got):\n%s", d)
	}
}

// failingOwners is memStore with a WriteOwners that refuses the workflows
// in refuse and records the others.
type failingOwners struct {
	*memStore
	refuse map[string]bool
	calls  int
}

func (f *failingOwners) WriteOwners(set map[string]store.Owner, remove []string) map[string]error {
	f.calls++
	failed := make(map[string]error)
	for wf, o := range set {
		if f.refuse[wf] {
			failed[wf] = errors.New("injected: no space left")
			continue
		}
		f.SetOwner(wf, o)
	}
	for _, wf := range remove {
		if f.refuse[wf] {
			failed[wf] = errors.New("injected: read-only")
			continue
		}
		f.DeleteOwner(wf)
	}
	return failed
}

// TestOwnerWriteFailuresLogged: the records a store's WriteOwners could
// not write or remove are logged one by one, naming the workflow; the
// others are recorded; the engine calls it once per load that changes
// owners, not once per workflow.
func TestOwnerWriteFailuresLogged(t *testing.T) {
	st := &failingOwners{memStore: newMemStore(), refuse: map[string]bool{"bad": true}}
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "p", fixture.Hourly("good"), fixture.Hourly("bad"), fixture.Hourly("other"))
	logs := &logCounter{}
	e, err := New(Options{WorkflowsDir: wdir, Store: st, Services: map[string]external.Service{workflow.ServiceCommand: newFake()},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	now := ts("2024-01-01T00:30Z")
	if err := e.Step(t.Context(), now, nil); err != nil {
		t.Fatal(err)
	}
	if st.calls != 1 {
		t.Fatalf("WriteOwners called %d times for one load, want 1", st.calls)
	}
	if n := logs.count("workflow owner not recorded"); n != 1 || logs.count("workflow=bad") != 1 {
		t.Fatalf("want one log line for bad:\n%s", logs.String())
	}
	owners, _ := st.Owners()
	if d := cmp.Diff(map[string]store.Owner{"good": {Project: "p", File: "p.json"}, "other": {Project: "p", File: "p.json"}}, owners); d != "" {
		t.Fatalf("owners (-want +got):\n%s", d)
	}
	// A removal that fails is logged as such.
	st.refuse = map[string]bool{"other": true}
	fixture.WriteProject(t, wdir, "p", fixture.Hourly("good"), fixture.Hourly("bad"))
	if err := e.Step(t.Context(), now.Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if n := logs.count("stale workflow owner record not removed"); n != 1 {
		t.Fatalf("want one log line for the removal of other:\n%s", logs.String())
	}
}
