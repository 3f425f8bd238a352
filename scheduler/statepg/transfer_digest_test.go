package statepg

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// fmtRecords is the listing as it was formatted with fmt before
// appendRecords: a checksum of a copy made by an older celos still
// matches.
func fmtRecords(wf string, r Records) string {
	var b strings.Builder
	for _, st := range r.States {
		fmt.Fprintf(&b, "S %q %d %s %q %d\n", wf, key(st.ID.Time), st.Status, st.ExternalID, st.RetryCount)
	}
	for _, m := range r.Marks {
		fmt.Fprintf(&b, "R %q %d %d\n", wf, key(m.Slot), key(m.At))
	}
	ts := make([]time.Time, 0, len(r.Intents))
	for t := range r.Intents {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	for _, t := range ts {
		fmt.Fprintf(&b, "I %q %d %d %d\n", wf, key(t), r.Intents[t].Attempt, key(r.Intents[t].Time))
	}
	if r.Paused {
		fmt.Fprintf(&b, "P %q\n", wf)
	}
	if r.Owner != nil {
		fmt.Fprintf(&b, "O %q %q %q\n", wf, r.Owner.Project, r.Owner.File)
	}
	for _, k := range sortedRuns(r.Runs) {
		fmt.Fprintf(&b, "N %q %d %d %d\n", wf, k.slot, k.attempt, k.at)
	}
	return b.String()
}

// TestAppendRecordsIsTheFmtListing: the listing appendRecords makes is
// byte for byte the one fmt made, for any records (odd strings included:
// quotes, newlines, invalid UTF-8, non-ASCII), so checksums do not change.
func TestAppendRecordsIsTheFmtListing(t *testing.T) {
	anyString := rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z"\\\n\x00é]{0,8}`), rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }))
	anyTime := rapid.Custom(func(t *rapid.T) time.Time {
		return time.UnixMilli(rapid.Int64Range(-1e13, 1e13).Draw(t, "ms")).UTC()
	})
	rapid.Check(t, func(t *rapid.T) {
		wf := anyString.Draw(t, "wf")
		var r Records
		for range rapid.IntRange(0, 4).Draw(t, "states") {
			r.States = append(r.States, slot.State{ID: slot.ID{Workflow: wf, Time: anyTime.Draw(t, "slot")},
				Status: slot.Status(anyString.Draw(t, "status")), ExternalID: anyString.Draw(t, "ext"), RetryCount: rapid.Int().Draw(t, "retry")})
		}
		for range rapid.IntRange(0, 3).Draw(t, "marks") {
			r.Marks = append(r.Marks, store.RerunMark{Slot: anyTime.Draw(t, "markSlot"), At: anyTime.Draw(t, "markAt")})
		}
		if n := rapid.IntRange(0, 3).Draw(t, "intents"); n > 0 {
			r.Intents = make(map[time.Time]store.Intent)
			for range n {
				r.Intents[anyTime.Draw(t, "intentSlot")] = store.Intent{Attempt: rapid.Int().Draw(t, "attempt"), Time: anyTime.Draw(t, "intentAt")}
			}
		}
		r.Paused = rapid.Bool().Draw(t, "paused")
		if rapid.Bool().Draw(t, "owned") {
			r.Owner = &store.Owner{Project: anyString.Draw(t, "project"), File: anyString.Draw(t, "file")}
		}
		for range rapid.IntRange(0, 3).Draw(t, "runs") {
			r.Runs = append(r.Runs, store.Run{Slot: anyTime.Draw(t, "runSlot"), Attempt: rapid.IntRange(0, 1000).Draw(t, "runAttempt"), At: anyTime.Draw(t, "runAt")})
		}
		want := fmtRecords(wf, r)
		if got := string(appendRecords([]byte("left over"), wf, r)[len("left over"):]); got != want {
			t.Fatalf("appendRecords:\n%q\nfmt:\n%q", got, want)
		}
	})
}
