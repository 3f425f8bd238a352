package server

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// TestRunPrunes: --prune-older-than prunes the state database at start
// (and daily): an old final slot goes, an old RUNNING slot and a recent
// final one stay; a retention under 8 days stops the start.
func TestRunPrunes(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "wf")
	os.Mkdir(wf, 0o755)
	db := filepath.Join(dir, "db")
	old := time.Now().UTC().Add(-60 * 24 * time.Hour)
	recent := time.Now().UTC().Add(-2 * 24 * time.Hour)
	write := func(at time.Time, status string) string {
		p := filepath.Join(db, "state", "wf", at.Format("2006-01-02"), at.Format("15:04:05.000Z"))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(`{"status":"`+status+`","externalID":"x","retryCount":0}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := write(old.Truncate(time.Hour), "SUCCESS")
	kept := []string{write(old.Truncate(time.Hour).Add(time.Hour), "RUNNING"), write(recent.Truncate(time.Hour), "SUCCESS")}

	// An old run of the command service (its record and log) goes too; the
	// jobs directory is beside the db by default.
	oldJob := filepath.Join(dir, "jobs", "wf", old.Format("20060102T150405Z")+"."+strconv.FormatInt(old.UnixNano(), 10))
	os.MkdirAll(oldJob, 0o755)
	if err := os.WriteFile(filepath.Join(oldJob, "exit.json"), []byte(`{"exitCode":0,"finished":"`+old.Format(time.RFC3339)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	var stderr servertest.LockedBuffer
	cfg := Config{Workflows: wf, DB: db, URLFile: filepath.Join(dir, "url"), Stderr: &stderr, PruneOlderThan: 30 * 24 * time.Hour}
	_, stop := startRun(t, cfg, openEngine)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "pruned command jobs") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "deleted=1") {
		t.Errorf("log:\n%s", stderr.String())
	}
	if _, err := os.Stat(oldJob); !os.IsNotExist(err) {
		t.Errorf("old command job not pruned: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("old final slot not pruned: %v", err)
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("pruned %s: %v", p, err)
		}
	}

	cfg.PruneOlderThan = 3 * 24 * time.Hour
	os.Remove(cfg.URLFile)
	if err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "must be at least") {
		t.Errorf("3-day retention: %v", err)
	}
}

// TestRunPruneKeepsWhatLookBackTriggersRead is the scenario: a
// workflow whose trigger is `offset −864000 s` around a success trigger is
// ready before --prune-older-than 8d prunes and still ready after: the
// success state it reads, ten days before its slot, is kept (18 days for
// that workflow, logged naming both), while an unread workflow's equally
// old slot is pruned.
func TestRunPruneKeepsWhatLookBackTriggersRead(t *testing.T) {
	dir := t.TempDir()
	wfDir := filepath.Join(dir, "wf")
	os.Mkdir(wfDir, 0o755)
	wf := func(id string, trig workflow.Trigger) workflow.Workflow {
		w := fixture.Hourly(id)
		w.Trigger = trig
		return w
	}
	lookBack := workflow.Trigger{Type: workflow.TriggerOffset, Seconds: -864000, Trigger: &workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: "a"}}
	fixture.WriteProject(t, wfDir, "p",
		wf("a", workflow.Trigger{Type: workflow.TriggerAlways}),
		wf("b", lookBack),
		wf("c", workflow.Trigger{Type: workflow.TriggerAlways}),
	)
	// A file that does not load: what its triggers read is unknown, which
	// the prune says.
	if err := os.WriteFile(filepath.Join(wfDir, "broken.json"), []byte(`{"format":`), 0o644); err != nil {
		t.Fatal(err)
	}
	dbDir := filepath.Join(dir, "db")
	bSlot := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour) // in the window
	aSlot := bSlot.Add(-864000 * time.Second)                         // 10 days and 2 hours old
	ready := func() bool {
		t.Helper()
		db, err := statedb.Open(dbDir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ok, err := trigger.Ready(context.Background(), trigger.Env{States: db}, &lookBack, bSlot, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	func() {
		db, err := statedb.Open(dbDir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, id := range []string{"a", "c"} {
			if err := db.Put(slot.State{ID: slot.ID{Workflow: id, Time: aSlot}, Status: slot.Success, ExternalID: "x"}); err != nil {
				t.Fatal(err)
			}
		}
	}()
	if !ready() {
		t.Fatal("b's slot is not ready before the prune")
	}

	log := pruneOnce(t, Config{Workflows: wfDir, DB: dbDir, URLFile: filepath.Join(dir, "url"), PruneOlderThan: 8 * 24 * time.Hour})
	if !strings.Contains(log, "deleted=1") {
		t.Errorf("c's old slot not pruned:\n%s", log)
	}
	if !strings.Contains(log, "workflow=a readBy=b lookBack=10d olderThan=8d keptFor=18d") {
		t.Errorf("the longer retention of a is not logged:\n%s", log)
	}
	if !strings.Contains(log, "pruning without the triggers of a workflows file that did not load") || !strings.Contains(log, "broken.json") {
		t.Errorf("the unknown triggers of broken.json are not logged:\n%s", log)
	}
	if !ready() {
		t.Errorf("b's slot is not ready after the prune: a's state %s was pruned", aSlot)
	}
}

// TestRunPruneKeepsWhatRunConstraintsCount: --prune-older-than 8d keeps
// what a minInterval of 30 days counts, 20 days after the submission: the
// record of submissions and the slot (which a record of an older celos
// would lack), logged; an unconstrained workflow's equally old slot goes.
// Before, the prune dropped the submission, and the next slot ran 10 days
// early.
func TestRunPruneKeepsWhatRunConstraintsCount(t *testing.T) {
	dir := t.TempDir()
	wfDir := filepath.Join(dir, "wf")
	os.Mkdir(wfDir, 0o755)
	m := fixture.Hourly("monthly")
	m.Constraints = &workflow.Constraints{MinIntervalSeconds: 30 * 86400, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	fixture.WriteProject(t, wfDir, "p", m, fixture.Hourly("c"))
	dbDir := filepath.Join(dir, "db")
	old := time.Now().UTC().Truncate(time.Hour).Add(-20 * 24 * time.Hour)
	run := store.Run{Slot: old, At: old.Add(time.Minute)}
	func() {
		db, err := statedb.Open(dbDir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, id := range []string{"monthly", "c"} {
			if err := db.Put(slot.State{ID: slot.ID{Workflow: id, Time: old}, Status: slot.Success, ExternalID: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		if failed := db.PutRuns(map[string][]store.Run{"monthly": {run}}); failed != nil {
			t.Fatal(failed)
		}
	}()

	log := pruneOnce(t, Config{Workflows: wfDir, DB: dbDir, URLFile: filepath.Join(dir, "url"), PruneOlderThan: 8 * 24 * time.Hour})
	if !strings.Contains(log, "deleted=1") {
		t.Errorf("c's old slot not pruned:\n%s", log)
	}
	if !strings.Contains(log, "workflow=monthly countsBack=30d olderThan=8d keptFor=30d") {
		t.Errorf("the longer retention of monthly is not logged:\n%s", log)
	}
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Runs("monthly")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]store.Run{run}, got, cmpopts.EquateApproxTime(time.Millisecond)); d != "" {
		t.Errorf("monthly's record of submissions after the prune (-want +got):\n%s", d)
	}
	if _, found, err := db.Get(slot.ID{Workflow: "monthly", Time: old}); err != nil || !found {
		t.Errorf("monthly's slot of 20 days ago after the prune: found %v, %v", found, err)
	}
}

// pruneOnce runs a server with cfg (its --prune-older-than set) until its
// first prune of the state database is logged, stops it, and returns its
// log.
func pruneOnce(t *testing.T, cfg Config) string {
	t.Helper()
	var stderr servertest.LockedBuffer
	cfg.Stderr = &stderr
	_, stop := startRun(t, cfg, openEngine)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "pruned state database") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return stderr.String()
}
