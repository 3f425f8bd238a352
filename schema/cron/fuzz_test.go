package cron_test

import (
	"testing"
	"time"

	"github.com/celos-go/celos/schema/cron"
)

var fuzzZones = []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "America/Sao_Paulo"}

// FuzzParse checks that Parse never panics, that a parsed expression prints
// back to one that parses, and that Between over a bounded window ends with
// sorted whole-second UTC times inside it that agree with Next. Crashers
// found by `go test -fuzz FuzzParse` land in testdata/fuzz/FuzzParse and
// run as regression cases with plain `go test`.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"0 0 * * * ?", "0 * * * * ?", "*/15 * * * * ?", "0 30 2 * * ?", "0 30 1 * * ?",
		"0 0 0 29 2 ?", "0 0 0 31 2 ?", "0 0 0 L * ?", "0 0 0 L-3 * ?", "0 0 0 LW * ?",
		"0 0 0 15W * ?", "0 0 0 ? * 6#3", "0 0 0 ? * FRIL", "0 0 12 ? * MON-FRI",
		"0 0 22-2 ? * SAT-MON", "0 50-10/7 * * NOV-FEB ?", "0 0 0 1 1 ? 2025-2030/2",
		"5/20 10,20,30 0-23/3 1-31/2 */2 ? *", "0 0 0 ? 2 1#5", "0 0 0 32 * ?", "", "? ? ? ? ? ?",
		"0 0 0 1W,L * ?", "0 0 0 ? * L", "0 0 0 ? * 1L", "0 /5 * * * ?",
	} {
		f.Add(s, uint8(1), int64(1710040000), uint32(86400))
	}
	f.Fuzz(func(t *testing.T, expr string, zone uint8, fromSec int64, span uint32) {
		loc, err := time.LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			t.Fatal(err)
		}
		e, err := cron.Parse(expr, loc)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("empty error for %q", expr)
			}
			return
		}
		if _, err := cron.Parse(e.String(), loc); err != nil {
			t.Fatalf("String() %q of %q does not parse: %v", e.String(), expr, err)
		}
		// A window in years 1-9999 of at most 6 hours.
		const lo, hi = -62135596800, 253402300800
		from := time.Unix(lo+(fromSec%(hi-lo)+(hi-lo))%(hi-lo), 0)
		to := from.Add(time.Duration(span%(6*3600)) * time.Second)
		got := e.Between(from, to)
		for i, v := range got {
			if v.Before(from) || !v.Before(to) || v.Nanosecond() != 0 || v.Location() != time.UTC {
				t.Fatalf("%q: fire time %v outside [%v, %v) or not whole UTC seconds", expr, v, from, to)
			}
			if i > 0 && !got[i-1].Before(v) {
				t.Fatalf("%q: not increasing: %v then %v", expr, got[i-1], v)
			}
		}
		next := e.Next(from.Add(-time.Nanosecond))
		if len(got) > 0 && !next.Equal(got[0]) {
			t.Fatalf("%q: Next(%v) = %v, Between starts with %v", expr, from, next, got[0])
		}
		if len(got) == 0 && !next.IsZero() && next.Before(to) {
			t.Fatalf("%q: Next(%v) = %v inside a window where Between found nothing", expr, from, next)
		}
	})
}
