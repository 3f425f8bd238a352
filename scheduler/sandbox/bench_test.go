package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/schema/workflow/testcase"
)

// BenchmarkTwentyDailyCases runs 20 test cases of an hourly workflow over
// one day each (25 slots: 00:00 to 24:00, both included), on the local
// disk with the command service, at several parallelisms: what
// `celos test` costs a project with that many cases. Each slot's job is
// a real process (its supervisor and sh) copying the hour's input.
func BenchmarkTwentyDailyCases(b *testing.B) {
	var hours []string
	files := map[string]string{}
	for h := 0; h <= 24; h++ {
		hh := fmt.Sprintf("%02d", h%24)
		hours = append(hours, hh)
		files[hh+"/data"] = "HELLO " + hh + "\n"
	}
	cases := make([]testcase.Case, 20)
	for i := range cases {
		cases[i] = testcase.Case{
			Name: fmt.Sprintf("day-%02d", i), Start: day, End: day.Add(24 * time.Hour), Timeout: 10 * time.Minute,
			Inputs:  inputs(hours[:24]...),
			Outputs: []testcase.Output{{Path: "/out", Comparer: testcase.Comparer{Type: "plain"}, Files: files}},
		}
	}
	for _, par := range []int{1, 2, 4, 8, 20} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			slots := 0
			for b.Loop() {
				res, err := Run(context.Background(), Options{Project: copyProject(), TempDir: b.TempDir(), Parallel: par}, cases)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if !r.Passed {
						b.Fatalf("%s: %q", r.Name, r.Failures)
					}
				}
				slots += 25 * len(cases)
			}
			b.ReportMetric(float64(slots)/b.Elapsed().Seconds(), "slots/s")
		})
	}
}
