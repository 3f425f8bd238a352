package statepg

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkRegisterLookup: what an event trigger costs in a bucket of
// 1,000 and 50,000 keys, a listing (every step before HasRegister) beside
// one lookup (docs/benchmarks.md, "Event triggers over a large bucket"):
//
//	go test ./scheduler/statepg -run '^$' -bench RegisterLookup -benchmem
func BenchmarkRegisterLookup(b *testing.B) {
	for _, keys := range []int{1000, 50000} {
		db, _ := openTest(b)
		ctx, cancel := db.ctx()
		_, err := db.pool.Exec(ctx, `INSERT INTO celos_registers (bucket, key, value)
SELECT 'ingest', 'k-' || lpad(i::text, 6, '0'), '{}'::json FROM generate_series(0, $1 - 1) AS i`, keys)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.pool.Exec(context.Background(), "ANALYZE celos_registers"); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("keys=%d/op=list", keys), func(b *testing.B) {
			for b.Loop() {
				if got, err := db.RegisterKeys("ingest", ""); err != nil || len(got) != keys {
					b.Fatal(len(got), err)
				}
			}
		})
		b.Run(fmt.Sprintf("keys=%d/op=lookup", keys), func(b *testing.B) {
			for b.Loop() {
				if ok, err := db.HasRegister("ingest", "k-000500"); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
