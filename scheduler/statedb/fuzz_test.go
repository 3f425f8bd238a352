package statedb

import (
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// FuzzParseState checks that the slot-file parser never panics, and that
// whatever it accepts survives a round trip through EncodeState.
func FuzzParseState(f *testing.F) {
	for _, s := range []string{
		`{"time":"2013-12-04T19:18:00.000Z","status":"RUNNING","externalID":"foo-external-ID","retryCount":0}`,
		`{"status":"SUCCESS","externalID":null,"retryCount":3}`,
		`{"status":"WAITING"}`,
		`{"status":"FAILURE","externalID":"\u00e9\n","retryCount":1,"extra":[1,2]}`,
		`{"status":"SUCC`, `null`, `[]`, `{"status":"DONE"}`, `{"status":"READY","retryCount":-1}`,
		`{"status":"READY","retryCount":1e3}`, `{"status":"READY"} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		status, ext, retry, err := ParseState(data)
		if err != nil {
			return
		}
		if !status.Valid() || retry < 0 {
			t.Fatalf("accepted %q as %q %d", data, status, retry)
		}
		st := slot.State{ID: slot.ID{Workflow: "wf", Time: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}, Status: status, ExternalID: ext, RetryCount: retry}
		s2, e2, r2, err := ParseState(EncodeState(st))
		if err != nil || s2 != status || e2 != ext || r2 != retry {
			t.Fatalf("round trip of %q: %q %q %d %v", data, s2, e2, r2, err)
		}
	})
}
