package cron_test

import (
	"testing"
	"time"

	"github.com/reugn/go-quartz/quartz"

	"github.com/celos-go/celos/schema/cron"
)

// TestAgainstGoQuartz cross-checks the first 200 fire times from 2023 with
// github.com/reugn/go-quartz in UTC, for expressions on which the two agree
// by design. Known differences, on purpose: go-quartz fires `0 0 0 29 2 ?`
// on 1 March in non-leap years (we fire only on 29 February, see
// TestBetween), clamps `31W` to the end of shorter months (we skip months
// without a 31st, as plain `31` does), and rejects wrapping ranges such as
// FRI-MON (which Quartz accepts).
func TestAgainstGoQuartz(t *testing.T) {
	for _, expr := range []string{
		"0 0 * * * ?", "*/15 * * * * ?", "0 */7 * * * ?", "0 0 12 ? * MON-FRI", "0 0 0 L * ?",
		"0 0 0 ? * 6#3", "0 0 0 ? * 6L", "0 0 0 15W * ?", "0 0 0 LW * ?", "0 0 0 L-2 * ?",
		"0 0 0 1W * ?", "0 15 10 ? * 2,4,6", "0 0 8-18/2 1,15 * ?", "30 5 3 ? JAN,JUL SUN",
	} {
		t.Run(expr, func(t *testing.T) {
			q, err := quartz.NewCronTriggerWithLoc(expr, time.UTC)
			if err != nil {
				t.Fatalf("go-quartz: %v", err)
			}
			e, err := cron.Parse(expr, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			prev := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second)
			qprev := prev.UnixNano()
			for range 200 {
				qn, err := q.NextFireTime(qprev)
				if err != nil {
					t.Fatalf("go-quartz after %v: %v", time.Unix(0, qprev).UTC(), err)
				}
				n := e.Next(prev)
				if !n.Equal(time.Unix(0, qn)) {
					t.Fatalf("after %v: go-quartz %v, cron %v", prev, time.Unix(0, qn).UTC(), n)
				}
				prev, qprev = n, qn
			}
		})
	}
}
