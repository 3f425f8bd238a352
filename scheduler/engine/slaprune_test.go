package engine

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
)

// TestPruneSLARecords: on both stores, the prune removes the records of
// SLA misses whose deadline is more than two windows old (of a workflow
// still stepped or not), and keeps the others: one two windows old, a
// recent one, one of an old slot with a recent deadline (a
// 30-day SLA), the key "since", a key of another form and records that do
// not read as one; the registers of other buckets are not touched.
func TestPruneSLARecords(t *testing.T) {
	now := ts("2026-11-25T00:00Z")
	day := 24 * time.Hour
	rec := func(wf string, slotAt time.Time, sla time.Duration) (string, json.RawMessage) {
		id := slot.ID{Workflow: wf, Time: slotAt}
		raw, _ := json.Marshal(slaRecord{Workflow: wf, Slot: slot.FormatTime(slotAt), Deadline: slot.FormatTime(slotAt.Add(sla)), Sent: slot.FormatTime(slotAt.Add(sla))})
		return slaKey(id), raw
	}
	type reg struct {
		bucket, key string
		value       json.RawMessage
	}
	var regs []reg
	add := func(key string, value json.RawMessage) { regs = append(regs, reg{slaBucket, key, value}) }
	goneKey, goneVal := rec("feed", now.Add(-20*day), time.Hour)
	add(goneKey, goneVal)
	undeployedKey, undeployedVal := rec("undeployed.wf", now.Add(-90*day), time.Hour) // a workflow no longer stepped
	add(undeployedKey, undeployedVal)
	edgeKey, edgeVal := rec("feed", now.Add(-15*day), day) // its deadline exactly two windows ago
	add(edgeKey, edgeVal)
	recentKey, recentVal := rec("feed", now.Add(-day), time.Hour)
	add(recentKey, recentVal)
	longKey, longVal := rec("monthly", now.Add(-40*day), 30*day) // deadline 10 days ago
	add(longKey, longVal)
	add(slaSinceKey, json.RawMessage(`{"since":"2026-01-01T00:00:00Z"}`))
	add("note", json.RawMessage(`"written by a person"`))
	oddKey, _ := rec("odd", now.Add(-30*day), time.Hour)
	add(oddKey, json.RawMessage(`{"deadline":"not a time"}`))
	regs = append(regs, reg{"ingest", goneKey, goneVal}) // another bucket, the same key
	want := []string{longKey, edgeKey, oddKey, recentKey, "note", slaSinceKey}
	slices.Sort(want)

	run := func(t *testing.T, r Registers) {
		for _, g := range regs {
			if err := r.PutRegister(g.bucket, g.key, g.value); err != nil {
				t.Fatal(err)
			}
		}
		n, err := PruneSLARecords(r, now)
		if err != nil || n != 2 {
			t.Fatalf("PruneSLARecords = %d, %v; want 2 removed", n, err)
		}
		got, err := r.RegisterKeys(slaBucket, "")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("records left (-want +got):\n%s", d)
		}
		if other, _ := r.RegisterKeys("ingest", ""); len(other) != 1 {
			t.Errorf("the bucket ingest after the prune: %v", other)
		}
		// Again: nothing more to remove.
		if n, err := PruneSLARecords(r, now); err != nil || n != 0 {
			t.Errorf("a second prune = %d, %v; want 0", n, err)
		}
	}
	t.Run("store=file", func(t *testing.T) {
		db, err := statedb.OpenWith(t.TempDir(), statedb.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		run(t, db)
	})
	t.Run("store=pg", func(t *testing.T) {
		db, err := statepg.Open(context.Background(), pgtest.Shared(t).CreateDB(t), statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		run(t, db)
	})
}
