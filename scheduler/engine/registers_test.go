package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// eventLife steps 300 hourly workflows with event triggers on keys of
// their own in one bucket, which also holds 2,000 keys no slot asks for,
// over a store whose registers another writer (put; on PostgreSQL another
// instance) writes: more keys than a step looks up one by one
// (maxRegisterLookups), so the step also lists the bucket. It returns the
// status of every workflow's slots after each step.
func eventLife(t *testing.T, db Store, put func(key string), del func(key string)) []string {
	t.Helper()
	const n = 300
	wdir := t.TempDir()
	ws := make([]workflow.Workflow, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("w%03d", i))
		ws[i].StartTime = ts("2026-11-24T08:00Z")
		ws[i].Trigger = workflow.Trigger{Type: workflow.TriggerEvent, Bucket: "ingest", Key: fmt.Sprintf("w%03d-${year}${month}${day}T${hour}", i)}
	}
	fixture.WriteProject(t, wdir, "p", ws...)
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2000; k++ {
		put(fmt.Sprintf("old-%05d", k))
	}
	for i := 0; i < n; i += 7 {
		put(fmt.Sprintf("w%03d-20261124T08", i))
	}
	var life []string
	step := func(at string) {
		t.Helper()
		if err := e.Step(context.Background(), ts(at), nil); err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		var first []string // the first workflows' slots, by name
		for i := 0; i < n; i++ {
			wf := fmt.Sprintf("w%03d", i)
			got, err := e.Slots(context.Background(), wf, ts("2026-11-24T08:00Z"), ts(at))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range got {
				count[slot.FormatTime(s.ID.Time)+" "+string(s.Status)]++
				if i < 3 {
					first = append(first, wf+"@"+slot.FormatTime(s.ID.Time)+" "+string(s.Status))
				}
			}
		}
		life = append(life, fmt.Sprintf("%s: %v %v", at, count, first))
	}
	step("2026-11-24T08:30Z")
	put("w001-20261124T08") // written between two steps
	put("w002-20261124T09")
	del("w002-20261124T09") // written and removed again
	step("2026-11-24T09:30Z")
	put("w002-20261124T09")
	step("2026-11-24T09:31Z")
	return life
}

// TestEventTriggerOnBothStores: event triggers ready the same slots at
// the same steps on the file store and on PostgreSQL, registers written by
// the server (file store) or by another instance (PostgreSQL) between
// steps included, also when a step asks for more keys of the bucket than
// it looks up one by one.
func TestEventTriggerOnBothStores(t *testing.T) {
	fdb, err := statedb.OpenWith(t.TempDir(), statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fdb.Close() })
	onDisk := eventLife(t, fdb,
		func(k string) { must(t, fdb.PutRegister("ingest", k, json.RawMessage(`{}`))) },
		func(k string) { must(t, fdb.DeleteRegister("ingest", k)) })

	dsn := pgtest.Shared(t).CreateDB(t)
	open := func() *statepg.DB {
		db, err := statepg.Open(context.Background(), dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	pg, other := open(), open()
	onPG := eventLife(t, pg,
		func(k string) { must(t, other.PutRegister("ingest", k, json.RawMessage(`{}`))) },
		func(k string) { must(t, other.DeleteRegister("ingest", k)) })
	if d := cmp.Diff(onDisk, onPG); d != "" {
		t.Fatalf("event triggers behave differently on PostgreSQL (-statedb +statepg):\n%s", d)
	}
	// 43 of 300 workflows have the register of 08:00 (every 7th); w001's
	// comes before 09:30, w002's of 09:00 (written and removed) at 09:31.
	want := []string{
		"2026-11-24T08:30Z: map[2026-11-24T08:00:00.000Z READY:43 2026-11-24T08:00:00.000Z WAITING:257] " +
			"[w000@2026-11-24T08:00:00.000Z READY w001@2026-11-24T08:00:00.000Z WAITING w002@2026-11-24T08:00:00.000Z WAITING]",
		"2026-11-24T09:30Z: map[2026-11-24T08:00:00.000Z READY:1 2026-11-24T08:00:00.000Z RUNNING:43 2026-11-24T08:00:00.000Z WAITING:256 2026-11-24T09:00:00.000Z WAITING:300] " +
			"[w000@2026-11-24T09:00:00.000Z WAITING w000@2026-11-24T08:00:00.000Z RUNNING w001@2026-11-24T09:00:00.000Z WAITING w001@2026-11-24T08:00:00.000Z READY " +
			"w002@2026-11-24T09:00:00.000Z WAITING w002@2026-11-24T08:00:00.000Z WAITING]",
		"2026-11-24T09:31Z: map[2026-11-24T08:00:00.000Z RUNNING:44 2026-11-24T08:00:00.000Z WAITING:256 2026-11-24T09:00:00.000Z READY:1 2026-11-24T09:00:00.000Z WAITING:299] " +
			"[w000@2026-11-24T09:00:00.000Z WAITING w000@2026-11-24T08:00:00.000Z RUNNING w001@2026-11-24T09:00:00.000Z WAITING w001@2026-11-24T08:00:00.000Z RUNNING " +
			"w002@2026-11-24T09:00:00.000Z READY w002@2026-11-24T08:00:00.000Z WAITING]",
	}
	if d := cmp.Diff(want, onDisk); d != "" {
		t.Errorf("the steps (-want +got):\n%s", d)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
