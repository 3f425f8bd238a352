package statepg

import (
	"context"
	"fmt"
	"testing"

	"github.com/celos-go/celos/scheduler"
)

// BenchmarkRefreshProblems10000: an instance's Refresh with 10,000
// workflows' problems published (one each), after another instance
// republished `changed` of them (outside the timing); and the first
// Refresh of an instance, which reads them all (full=1):
//
//	go test ./scheduler/statepg -run '^$' -bench 'RefreshProblems10000' -benchmem
func BenchmarkRefreshProblems10000(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		changed int
		full    bool
	}{{0, false}, {10, false}, {1000, false}, {0, true}} {
		name := fmt.Sprintf("changed=%d", c.changed)
		if c.full {
			name = "full=1"
		}
		b.Run(name, func(b *testing.B) {
			w, dsn := openTest(b)
			r := openDSN(b, dsn)
			wfs := make([]string, 10000)
			set := make(map[string][]scheduler.Problem, len(wfs))
			for i := range wfs {
				wfs[i] = fmt.Sprintf("wf-%05d", i)
				set[wfs[i]] = []scheduler.Problem{problem(wfs[i], "2026-01-01T10:00:00Z", "trigger", "hdfs: connection refused")}
			}
			if err := w.PublishProblems(set); err != nil {
				b.Fatal(err)
			}
			if _, err := r.Refresh(ctx); err != nil {
				b.Fatal(err)
			}
			var queries int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				batch := make(map[string][]scheduler.Problem, c.changed)
				for j := range c.changed {
					wf := wfs[(i*c.changed+j)%len(wfs)]
					batch[wf] = []scheduler.Problem{problem(wf, "2026-01-01T11:00:00Z", "trigger", fmt.Sprintf("hdfs: timeout %d", i))}
				}
				if err := w.PublishProblems(batch); err != nil {
					b.Fatal(err)
				}
				if c.full {
					r.forgetProblems()
				}
				q0 := r.Queries()
				b.StartTimer()
				_, err := r.Refresh(ctx)
				b.StopTimer()
				queries += r.Queries() - q0
				if err != nil || len(r.PublishedWorkflows()) != len(wfs) {
					b.Fatalf("Refresh: %d workflows with problems, want %d; %v", len(r.PublishedWorkflows()), len(wfs), err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
		})
	}
}
