package engine

import (
	"context"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statepg"
)

// TestSlotsOnPostgresFailsWhenTheDatabaseIsGone: on the PostgreSQL store
// of a real server, a listing lists every slot (none unreadable: a row
// always parses); once the server is gone, a listing that must read the
// database fails with the error instead of answering a partial or empty
// list (TestSlotsFailsOnAReadError has a read failing in the middle of a
// listing, which the PostgreSQL store cannot be made to do on demand).
func TestSlotsOnPostgresFailsWhenTheDatabaseIsGone(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := srv.CreateDB(t)
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "p", w)
	now := ts("2024-01-01T04:30Z")
	open := func() *Engine {
		t.Helper()
		pg, err := statepg.Open(ctx, dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pg.Close() })
		e, err := New(Options{WorkflowsDir: wdir, Store: pg, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	if err := e.Step(ctx, now, nil); err != nil {
		t.Fatal(err)
	}
	got, err := e.Slots(ctx, "wf", w.StartTime, now)
	if err != nil || len(got) != 5 {
		t.Fatalf("Slots: %d slots, %v; want 5", len(got), err)
	}
	for _, s := range got {
		if s.Unreadable != nil || s.Status == "" {
			t.Errorf("%s: %+v", s.ID, s)
		}
	}
	// A second instance, whose index of wf is not loaded yet.
	e2 := open()
	srv.Stop()
	got, err = e2.Slots(ctx, "wf", w.StartTime, now)
	if err == nil {
		t.Fatalf("Slots with the database gone: %d slots, no error; want the error", len(got))
	}
	t.Logf("with the database gone: %v", err)
}
