package statedb

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/store"

	"github.com/celos-go/celos/scheduler/slot"
	"pgregory.net/rapid"
)

// TestIndexMatchesDisk applies random writes (single puts, batches,
// rerun marks, intents, in bulk or one by one) and checks that a database
// reopened on the directory reads exactly what the index held.
func TestIndexMatchesDisk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "celos-statedb-prop-*")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		db, err := OpenWith(dir, Options{NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		base := time.Date(2024, 1, 1, 23, 0, 0, 0, time.UTC)
		genID := rapid.Custom(func(t *rapid.T) slot.ID {
			return slot.ID{
				Workflow: rapid.SampledFrom([]string{"a", "b", "c.d"}).Draw(t, "wf"),
				Time:     base.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "h")) * 30 * time.Minute),
			}
		})
		genState := rapid.Custom(func(t *rapid.T) slot.State {
			return slot.State{
				ID:         genID.Draw(t, "id"),
				Status:     rapid.SampledFrom(slot.Statuses).Draw(t, "status"),
				ExternalID: rapid.SampledFrom([]string{"", "job-1", "x\"y"}).Draw(t, "ext"),
				RetryCount: rapid.IntRange(0, 3).Draw(t, "retry"),
			}
		})
		now := base.Add(24 * time.Hour)
		for range rapid.IntRange(1, 30).Draw(rt, "ops") {
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0:
				if err := db.Put(genState.Draw(rt, "put")); err != nil {
					rt.Fatal(err)
				}
			case 1:
				b := db.Batch()
				for range rapid.IntRange(0, 5).Draw(rt, "n") {
					if err := b.Put(genState.Draw(rt, "bput")); err != nil {
						rt.Fatal(err)
					}
				}
				if failed := b.Commit(); failed != nil {
					rt.Fatal(failed)
				}
			case 2:
				if err := db.MarkRerun(genID.Draw(rt, "mark"), now); err != nil {
					rt.Fatal(err)
				}
			case 3:
				if err := db.UnmarkRerun(genID.Draw(rt, "unmark")); err != nil {
					rt.Fatal(err)
				}
			case 4:
				ins := map[slot.ID]store.Intent{}
				for range rapid.IntRange(0, 3).Draw(rt, "n") {
					ins[genID.Draw(rt, "intent")] = store.Intent{Attempt: 1, Time: now}
				}
				if failed := db.PutIntents(ins); failed != nil {
					rt.Fatal(failed)
				}
			case 5:
				if err := db.DeleteIntents([]slot.ID{genID.Draw(rt, "del")}); err != nil {
					rt.Fatal(err)
				}
			case 6:
				if err := db.PutIntent(genID.Draw(rt, "intent1"), store.Intent{Attempt: 2, Time: now}); err != nil {
					rt.Fatal(err)
				}
			}
		}
		snap := func(db *DB) string {
			out := ""
			for _, wf := range []string{"a", "b", "c.d"} {
				sts, err := db.Range(wf, base, now)
				if err != nil {
					rt.Fatal(err)
				}
				act, _ := db.Active(wf)
				marks, _ := db.RerunMarks(wf)
				out += fmt.Sprintf("%s %v active=%d marks=%v\n", wf, sts, len(act), marks)
				for h := range 6 {
					id := slot.ID{Workflow: wf, Time: base.Add(time.Duration(h) * 30 * time.Minute)}
					in, ok, _ := db.GetIntent(id)
					if ok {
						out += fmt.Sprintf("  intent %s %+v\n", id, in)
					}
				}
			}
			return out
		}
		before := snap(db)
		db.Close()
		db2, err := Open(dir)
		if err != nil {
			rt.Fatal(err)
		}
		defer db2.Close()
		if after := snap(db2); after != before {
			rt.Fatalf("index and disk differ:\nindex:\n%s\ndisk:\n%s", before, after)
		}
		if p := db2.Problems(); len(p) > 0 {
			rt.Fatalf("problems: %v", p)
		}
	})
}
