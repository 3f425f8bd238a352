package statedb

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRegisterLookup: what an event trigger costs in a bucket of
// 1,000 and 50,000 keys, a listing (every step before HasRegister) beside
// one lookup (docs/benchmarks.md, "Event triggers over a large bucket"):
//
//	go test ./scheduler/statedb -run '^$' -bench RegisterLookup -benchmem
func BenchmarkRegisterLookup(b *testing.B) {
	for _, keys := range []int{1000, 50000} {
		dir := b.TempDir()
		bucket := filepath.Join(dir, "register", "ingest")
		if err := os.MkdirAll(bucket, 0o755); err != nil {
			b.Fatal(err)
		}
		for k := 0; k < keys; k++ {
			if err := os.WriteFile(filepath.Join(bucket, fmt.Sprintf("k-%06d", k)), []byte(`{}`), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		db, err := Open(dir)
		if err != nil {
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
		db.Close()
	}
}
