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
// each ran, on PostgreSQL; "1000-digest": the same 1,000 records under
// the keys with a digest that celos writes since the records of two
// instances no longer replace each other (a known key is not read
// again), "1000": under the keys of the celos before:
//
//	go test ./scheduler/engine -run '^$' -bench 'ReadDepartures' -benchmem
func BenchmarkReadDepartures(b *testing.B) {
	for _, c := range []struct {
		n      int
		digest bool
	}{{0, false}, {1000, false}, {1000, true}} {
		n := c.n
		name := fmt.Sprint(n)
		if c.digest {
			name += "-digest"
		}
		b.Run(name, func(b *testing.B) {
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
				k := departedKey(w.ID, "etl")
				if c.digest {
					k = departedRecordKey(k, v)
				}
				if err := db.PutRegister(departedBucket, k, v); err != nil {
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
