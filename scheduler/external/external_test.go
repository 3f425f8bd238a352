package external

import (
	"testing"
	"time"
)

func TestTimeVars(t *testing.T) {
	// A slot time given in another zone is read in UTC, zero padded.
	at := time.Date(2016, 2, 29, 1, 2, 3, 0, time.FixedZone("EST", -5*3600))
	got := TimeVars(at)
	want := map[string]string{"year": "2016", "month": "02", "day": "29", "hour": "06", "minute": "02", "second": "03"}
	if len(got) != len(want) {
		t.Fatalf("TimeVars = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("TimeVars[%q] = %q, want %q", k, got[k], v)
		}
	}
}
