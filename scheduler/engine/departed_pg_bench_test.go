package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statepg"
)

// BenchmarkReadDepartures is what an instance of a cluster spends at
// every step reading the departures (docs/benchmarks.md, "Departures read
// at every step"): none, and 1,000 workflows undeployed while a job of
// each ran, on PostgreSQL:
//
//	go test ./scheduler/engine -run '^$' -bench 'ReadDepartures' -benchmem
func BenchmarkReadDepartures(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dsn := pgtest.Shared(b).CreateDB(b)
			db, err := statepg.Open(context.Background(), dsn, statepg.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			for i := range n {
				w := fixture.Hourly(fmt.Sprintf("gone-%04d", i))
				w.Pool = "etl"
				v, err := json.Marshal(departure{Workflow: &w, Pool: "etl", Slots: []time.Time{ts("2026-11-24T09:00Z")}})
				if err != nil {
					b.Fatal(err)
				}
				if err := db.PutRegister(departedBucket, departedKey(w.ID, "etl"), v); err != nil {
					b.Fatal(err)
				}
			}
			e, err := New(Options{WorkflowsDir: b.TempDir(), Store: db, Logger: discard, Owns: func(string) bool { return true }})
			if err != nil {
				b.Fatal(err)
			}
			e.readDepartures()
			if len(e.departed) != n {
				b.Fatalf("%d departures read, want %d", len(e.departed), n)
			}
			b.ResetTimer()
			for range b.N {
				e.readDepartures()
			}
		})
	}
}
