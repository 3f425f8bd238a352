package schema

import (
	"runtime"
	"testing"

	"github.com/celos-go/celos/internal/cache"
)

// BenchmarkCompileCached1000 compiles the 1,000-workflow benchmark
// project in-process three ways: without the cache (Compile and Marshal,
// what celos export did), a first run that fills an empty cache, and an
// unchanged project answered from the cache (reading and hashing every
// input, reading the entry). The process start-up of the commands is
// not included: scripts/bench-export.sh measures the commands.
//
//	go test -run '^$' -bench CompileCached1000 -benchmem ./schema
func BenchmarkCompileCached1000(b *testing.B) {
	dir := b.TempDir()
	writeBenchProject(b, dir, 1000)
	run := func(b *testing.B, f func(i int) *Compiled, wantHit bool) {
		b.ReportAllocs()
		runtime.GC()
		start := cpuTime()
		for i := 0; i < b.N; i++ {
			r := f(i)
			if r.Err != nil || r.Hit != wantHit || len(r.JSON) == 0 {
				b.Fatalf("hit %v (want %v), %d bytes, %v", r.Hit, wantHit, len(r.JSON), r.Err)
			}
		}
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
	b.Run("nocache", func(b *testing.B) {
		run(b, func(int) *Compiled { return CompileCached(dir, nil) }, false)
	})
	b.Run("first", func(b *testing.B) {
		run(b, func(int) *Compiled {
			return CompileCached(dir, &Cache{Store: cache.Open(b.TempDir()), Build: "bench"})
		}, false)
	})
	b.Run("cached", func(b *testing.B) {
		cc := &Cache{Store: cache.Open(b.TempDir()), Build: "bench"}
		CompileCached(dir, cc)
		b.ResetTimer()
		run(b, func(int) *Compiled { return CompileCached(dir, cc) }, true)
	})
}
