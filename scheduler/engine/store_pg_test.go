package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
)

// statepg.DB is a Store and keeps the registers.
var (
	_ Store     = (*statepg.DB)(nil)
	_ Registers = (*statepg.DB)(nil)
)

// TestEngineOnPostgres runs storeLife (see TestEngineOnAnotherStore) on
// the PostgreSQL store of a real server and expects the same slots after
// every step as on the file store; then a second instance opened on the
// same database reads the same final state.
func TestEngineOnPostgres(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE life"); err != nil {
		t.Fatal(err)
	}
	pg, err := statepg.Open(ctx, srv.DSN("life"), statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	fdb, err := statedb.OpenWith(t.TempDir(), statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fdb.Close()
	onDisk := storeLife(t, fdb)
	onPG := storeLife(t, pg)
	if d := cmp.Diff(onDisk, onPG); d != "" {
		t.Fatalf("the engine behaves differently on PostgreSQL (-statedb +statepg):\n%s", d)
	}
	if len(onPG) < 10 {
		t.Fatalf("too short a life: %v", onPG)
	}
	pg2, err := statepg.Open(ctx, srv.DSN("life"), statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg2.Close()
	for _, wf := range []string{"a", "b"} {
		want, _ := pg.Count(wf)
		got, _ := pg2.Count(wf)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("workflow %s in the database differs from the index:\n%s", wf, d)
		}
		if fromDisk, _ := fdb.Count(wf); !cmp.Equal(fromDisk, got) {
			t.Errorf("workflow %s: %v on PostgreSQL, %v on disk", wf, got, fromDisk)
		}
	}
	if testing.Verbose() {
		t.Log("\n" + strings.Join(onPG, "\n"))
	}
}

// TestEngineSuiteOnPostgres runs the engine's tests that drive a rig
// (its store opened by openRigDB) on the PostgreSQL store instead of the
// file store: each rig gets the tables of one database emptied and a new
// statepg.DB over them. The property test (random steps, outages, reruns,
// kills) is among them; those that read the state files themselves
// (TestEngineLifecycleWithRealDB, the corrupt-file tests) are not.
func TestEngineSuiteOnPostgres(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx := context.Background()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE suite"); err != nil {
		t.Fatal(err)
	}
	first, err := statepg.Open(ctx, srv.DSN("suite"), statepg.Options{}) // migrates
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	saved := openRigDB
	defer func() { openRigDB = saved }()
	opened := 0
	openRigDB = func(t tlike, dir string) (rigDB, error) {
		opened++
		if err := srv.Exec(ctx, "suite", "TRUNCATE celos_workflows, celos_slots, celos_rerun_marks, celos_intents, celos_paused, celos_owners, celos_registers"); err != nil {
			return nil, err
		}
		return statepg.Open(ctx, srv.DSN("suite"), statepg.Options{})
	}
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"TestDependentScheduleErrorsOnlyThatWorkflow", TestDependentScheduleErrorsOnlyThatWorkflow},
		{"TestEngineProperties", TestEngineProperties},
		{"TestKillWithPanickingRecover", TestKillWithPanickingRecover},
		{"TestLeftoverIntentOfEarlierAttempt", TestLeftoverIntentOfEarlierAttempt},
		{"TestLoadErrorsAndReload", TestLoadErrorsAndReload},
		{"TestPanicInAServiceIsASlotError", TestPanicInAServiceIsASlotError},
		{"TestPersistentProblemLoggedOnce", TestPersistentProblemLoggedOnce},
		{"TestRerunKillPause", TestRerunKillPause},
		{"TestRunningOutsideWindowIsPolled", TestRunningOutsideWindowIsPolled},
		{"TestServiceErrorsLeaveSlotsAsTheyWere", TestServiceErrorsLeaveSlotsAsTheyWere},
		{"TestStepDoesNotDependOnVisitingOrder", TestStepDoesNotDependOnVisitingOrder},
		{"TestStepIDs", TestStepIDs},
		{"TestSubmitIntentRecovery", TestSubmitIntentRecovery},
	} {
		before := opened
		t.Run(c.name, c.test)
		if opened == before {
			t.Errorf("%s opened no store through openRigDB: it did not run on PostgreSQL", c.name)
		}
	}
}
