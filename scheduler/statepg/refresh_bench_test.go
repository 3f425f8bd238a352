package statepg

import (
	"context"
	"fmt"
	"testing"

	"github.com/celos-go/celos/scheduler/slot"
)

// BenchmarkRefresh10000: an instance's Refresh with 10,000 workflows
// loaded, after another instance wrote `changed` of them (the write is
// outside the timing). queries/op is the round trips of a Refresh:
//
//	go test ./scheduler/statepg -run '^$' -bench 'Refresh10000' -benchmem
//
// It uses only what main has too (docs/benchmarks.md runs it side by side
// with main through go test -overlay).
func BenchmarkRefresh10000(b *testing.B) {
	ctx := context.Background()
	for _, changed := range []int{0, 10, 1000} {
		b.Run(fmt.Sprintf("changed=%d", changed), func(b *testing.B) {
			w, dsn := openTest(b)
			r := openDSN(b, dsn)
			wfs := make([]string, 10000)
			sts := make([]slot.State, len(wfs))
			for i := range wfs {
				wfs[i] = fmt.Sprintf("wf-%05d", i)
				sts[i] = slot.State{ID: sid(wfs[i], 0), Status: slot.Success}
			}
			if failed := w.PutStates(sts); failed != nil {
				b.Fatal(failed)
			}
			r.Preload(wfs, 1)
			if _, err := r.Refresh(ctx); err != nil {
				b.Fatal(err)
			}
			var queries int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// changed workflows written by the other instance; r
				// reads them again (outside the timing, as a step would).
				var batch []slot.State
				for j := range changed {
					wf := wfs[(i*changed+j)%len(wfs)]
					batch = append(batch, slot.State{ID: sid(wf, 1+i), Status: slot.Success})
				}
				if failed := w.PutStates(batch); failed != nil {
					b.Fatal(failed)
				}
				q0 := r.Queries()
				b.StartTimer()
				n, err := r.Refresh(ctx)
				b.StopTimer()
				queries += r.Queries() - q0
				if err != nil || n != changed {
					b.Fatalf("Refresh dropped %d indexes, want %d; %v", n, changed, err)
				}
				r.Preload(wfs, 1)
				b.StartTimer()
			}
			b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
		})
	}
}
