package statepg

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
)

// runsOf is the records of submissions a test writes: wc's beside its
// other records, only-run's alone (a workflow known by its record only).
func runsOf() map[string][]store.Run {
	at := time.Date(2024, 1, 1, 3, 0, 30, 1_000_000, time.UTC)
	return map[string][]store.Run{
		"wc": {
			{Slot: t0, Attempt: 0, At: at},
			{Slot: t0.Add(time.Hour), Attempt: 1, At: at.Add(4 * time.Hour)},
		},
		"only-run": {{Slot: t0.Add(2 * time.Hour), Attempt: 0, At: at.Add(time.Hour)}},
	}
}

// TestMigrateAndExportCopyTheRunRecords: celos db migrate and export
// copied slot states, marks, intents, flags, owners and registers, not the
// records of submissions (run/<workflow>, celos_runs): after a migrate, a
// server on PostgreSQL counted minInterval and maxRuns from the slot times
// again. Both directions now copy them, count and verify them, and refuse
// a destination whose record differs.
func TestMigrateAndExportCopyTheRunRecords(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	fillFileStore(t, src)
	fdb, err := statedb.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	want := runsOf()
	if failed := fdb.PutRuns(want); failed != nil {
		t.Fatal(failed)
	}
	srcTree := tree(t, src)
	db, dsn := openTest(t)
	sum, err := Migrate(ctx, fdb, db, nil)
	fdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counts.Runs != 3 || sum.Counts.Workflows != 6 {
		t.Fatalf("migrate counted %v, want 3 submissions recorded of 6 workflows", sum.Counts)
	}
	pg := openDSN(t, dsn)
	for wf, runs := range want {
		got, err := pg.Runs(wf)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(runs, got); d != "" {
			t.Fatalf("the record of %s in PostgreSQL after the migrate (-file +pg):\n%s", wf, d)
		}
	}

	out := filepath.Join(t.TempDir(), "export")
	edb, err := statedb.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	esum, err := Export(ctx, pg, edb, nil)
	if err != nil || esum.Checksum != sum.Checksum || esum.Counts != sum.Counts {
		t.Fatalf("export: %+v %v, want %+v", esum, err, sum)
	}
	for wf, runs := range want {
		got, err := edb.Runs(wf)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(runs, got); d != "" {
			t.Fatalf("the record of %s in the exported directory (-pg +file):\n%s", wf, d)
		}
	}
	edb.Close()
	if d := cmp.Diff(srcTree, tree(t, out)); d != "" {
		t.Fatalf("the exported tree differs from the source (-source +export):\n%s", d)
	}

	// A destination whose record of wc holds a submission the source does
	// not: refused, nothing written.
	other := filepath.Join(t.TempDir(), "other")
	odb, err := statedb.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	theirs := []store.Run{{Slot: t0, Attempt: 0, At: time.Date(2024, 1, 1, 5, 0, 0, 0, time.UTC)}}
	if failed := odb.PutRuns(map[string][]store.Run{"wc": theirs}); failed != nil {
		t.Fatal(failed)
	}
	before := tree(t, other)
	_, err = Export(ctx, pg, odb, nil)
	odb.Close()
	if err == nil || !strings.Contains(err.Error(), "nothing copied") || !strings.Contains(err.Error(), "workflow wc") ||
		!strings.Contains(err.Error(), "submission") {
		t.Fatalf("export over another record of submissions: want a refusal naming wc, got %v", err)
	}
	if d := cmp.Diff(before, tree(t, other)); d != "" {
		t.Fatalf("the destination was changed (-before +after):\n%s", d)
	}
}
