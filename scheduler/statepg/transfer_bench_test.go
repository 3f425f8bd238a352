package statepg

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
)

// BenchmarkMigrate: celos db migrate of a file store of 500 workflows ×
// 168 hourly slots (7 days: 84,000 slot files) into a fresh database of
// a real PostgreSQL, each op from a freshly opened file store (its index
// empty; the files in the page cache). The -secondread case is what
// reading every workflow once more costs after the preload, the read of
// the source that plan and the copy loop both make (copyAll): what
// reading it once would save. Run:
//
//	go test ./scheduler/statepg -run '^$' -bench 'Migrate' -benchmem -benchtime 5x
//
// It uses only what main has too (docs/benchmarks.md runs it side by side
// with main through go test -overlay).
func BenchmarkMigrate(b *testing.B) {
	const workflows, hours = 500, 168
	dir := filepath.Join(b.TempDir(), "db")
	fdb, err := statedb.OpenWith(dir, statedb.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := fdb.Batch()
	for w := range workflows {
		for h := range hours {
			st := slot.State{ID: slot.ID{Workflow: fmt.Sprintf("wf-%03d", w), Time: t0.Add(time.Duration(h) * time.Hour)}, Status: slot.Success, ExternalID: "0000123-240101000000000-oozie-oozi-W"}
			if err := batch.Put(st); err != nil {
				b.Fatal(err)
			}
		}
	}
	if failed := batch.Commit(); failed != nil {
		b.Fatal(failed)
	}
	fdb.Close()
	srv := pgtest.Shared(b)
	ctx := context.Background()

	b.Run("migrate", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			db := openDSN(b, srv.CreateDB(b))
			src, err := statedb.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			sum, err := Migrate(ctx, src, db, nil)
			b.StopTimer()
			src.Close()
			db.Close()
			if err != nil || sum.Copied != workflows || sum.Counts.States != workflows*hours {
				b.Fatalf("Migrate: %+v, %v", sum, err)
			}
		}
	})

	b.Run("secondread", func(b *testing.B) {
		src, err := statedb.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		wfs, err := src.AllWorkflows()
		if err != nil {
			b.Fatal(err)
		}
		src.Preload(wfs, 8)
		s := fileSide(src)
		owners, err := s.owners()
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n := 0
			for _, wf := range wfs {
				r, err := s.records(wf, owners)
				if err != nil {
					b.Fatal(err)
				}
				n += len(r.States)
			}
			if n != workflows*hours {
				b.Fatalf("read %d states, want %d", n, workflows*hours)
			}
		}
	})
}
