package statepg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// BenchmarkPutIntentsPool: one step's submit intents (`intents` of them,
// of as many workflows) recorded without a pool and in a pool of
// `workflows` workflows, each with a week of hourly slots (168: SUCCESS,
// but the last RUNNING in one workflow out of ten), the pool's limit high
// enough to admit them all. The intents are removed between operations,
// outside the timing:
//
//	go test ./scheduler/statepg -run '^$' -bench 'PutIntentsPool' -benchmem
func BenchmarkPutIntentsPool(b *testing.B) {
	for _, c := range []struct{ workflows, intents int }{{10, 1}, {10, 10}, {1000, 1}, {1000, 10}} {
		db, dsn := openTest(b)
		fillPoolHistory(b, dsn, c.workflows)
		wfs := make([]string, c.workflows)
		for i := range wfs {
			wfs[i] = fmt.Sprintf("wf-%04d", i)
		}
		for _, pooled := range []bool{false, true} {
			name := fmt.Sprintf("workflows=%d/intents=%d/pool=%v", c.workflows, c.intents, pooled)
			b.Run(name, func(b *testing.B) {
				ins := make(map[slot.ID]store.Intent, c.intents)
				ids := make([]slot.ID, 0, c.intents)
				now := t0.Add(169 * time.Hour)
				for j := range c.intents {
					id := slot.ID{Workflow: wfs[j], Time: now}
					in := store.Intent{Time: now}
					if pooled {
						in.Pool = &store.PoolClaim{Name: "etl", Limit: c.workflows + c.intents, Workflows: wfs, Rank: j}
					}
					ins[id], ids = in, append(ids, id)
				}
				var queries int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					q0 := db.Queries()
					failed := db.PutIntents(ins)
					queries += db.Queries() - q0
					b.StopTimer()
					if failed != nil {
						b.Fatal(failed)
					}
					if err := db.DeleteIntents(ids); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
			})
		}
	}
}

// fillPoolHistory writes n workflows of 168 hourly slots from t0 (one in
// ten with its last slot RUNNING, the others SUCCESS), in one statement.
func fillPoolHistory(b *testing.B, dsn string, n int) {
	b.Helper()
	db := openDSN(b, dsn)
	_, err := db.Pool().Exec(context.Background(), `INSERT INTO celos_slots (workflow, slot_time, status, external_id)
SELECT format('wf-%s', lpad(w::text, 4, '0')), $1::timestamptz + h * interval '1 hour',
       CASE WHEN h = 167 AND w % 10 = 0 THEN 'RUNNING' ELSE 'SUCCESS' END, format('job-%s-%s', w, h)
FROM generate_series(0, $2 - 1) w, generate_series(0, 167) h`, t0, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool().Exec(context.Background(), "ANALYZE celos_slots"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPoolOccupied: the engine's read of a pool's occupancy in the
// database (PoolOccupied, one round trip), asked in a step of a clustered
// instance whose own view would hold a slot of a pool with workflows of
// other instances; the pool's workflows have a week of hourly slots as in
// BenchmarkPutIntentsPool (one in ten with a RUNNING slot):
//
//	go test ./scheduler/statepg -run '^$' -bench 'PoolOccupied' -benchmem
func BenchmarkPoolOccupied(b *testing.B) {
	for _, n := range []int{10, 1000} {
		db, dsn := openTest(b)
		fillPoolHistory(b, dsn, n)
		wfs := make([]string, n)
		for i := range wfs {
			wfs[i] = fmt.Sprintf("wf-%04d", i)
		}
		b.Run(fmt.Sprintf("workflows=%d", n), func(b *testing.B) {
			var queries int64
			for b.Loop() {
				q0 := db.Queries()
				got, err := db.PoolOccupied(wfs)
				queries += db.Queries() - q0
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != (n+9)/10 {
					b.Fatalf("%d occupied, want %d", len(got), (n+9)/10)
				}
			}
			b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
		})
	}
}
