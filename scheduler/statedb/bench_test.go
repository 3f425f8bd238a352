package statedb

import (
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// benchPutStates writes, per iteration, one new slot state to each of
// wfs workflows (an hour later than the last iteration's: a new day
// directory every 24 iterations), as a step of that many hourly workflows
// does, with PutStates (one batch).
func benchPutStates(b *testing.B, wfs int, opts Options) {
	db, err := OpenWith(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	t := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	sts := make([]slot.State, wfs)
	for i := range sts {
		sts[i] = slot.State{ID: slot.ID{Workflow: fmt.Sprintf("wf-%04d", i)}, Status: slot.Ready}
	}
	for b.Loop() {
		for i := range sts {
			sts[i].ID.Time = t
		}
		if failed := db.PutStates(sts); failed != nil {
			b.Fatal(failed)
		}
		t = t.Add(time.Hour)
	}
	b.ReportMetric(float64(wfs), "files/op")
}

// BenchmarkPutStates1000Workflows: a step's batch of 1,000 slot states in
// 1,000 workflow directories, synced as a server writes (two syncfs).
func BenchmarkPutStates1000Workflows(b *testing.B) { benchPutStates(b, 1000, Options{}) }

// BenchmarkPutStates1000WorkflowsNoSync is the same without the syncs:
// the file-system calls alone (directory opens, temporary files, renames).
func BenchmarkPutStates1000WorkflowsNoSync(b *testing.B) {
	benchPutStates(b, 1000, Options{NoSync: true})
}

// BenchmarkPutStatesFill100Workflows: a fresh 7-day fill of 100 hourly
// workflows (16,800 states, 700 new day directories) per iteration,
// without the syncs.
func BenchmarkPutStatesFill100Workflows(b *testing.B) {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	for b.Loop() {
		b.StopTimer()
		db, err := OpenWith(b.TempDir(), Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		var sts []slot.State
		for w := range 100 {
			for h := range 7 * 24 {
				sts = append(sts, slot.State{ID: slot.ID{Workflow: fmt.Sprintf("wf-%04d", w), Time: start.Add(time.Duration(h) * time.Hour)}, Status: slot.Success})
			}
		}
		b.StartTimer()
		if failed := db.PutStates(sts); failed != nil {
			b.Fatal(failed)
		}
		b.StopTimer()
		db.Close()
		n = len(sts)
		b.StartTimer()
	}
	b.ReportMetric(float64(n), "files/op")
}
