package statepg

// The records of submissions (store.Run) in a copy: listed in the
// checksum and compared with the destination's like the other records;
// and counted for celos db prune.

import (
	"fmt"
	"sort"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

type runKey struct{ slot, attempt, at int64 }

func runKeyOf(r store.Run) runKey {
	return runKey{key(r.Slot), int64(r.Attempt), key(r.At)}
}

// sortedRuns is runs by slot, attempt and time (the stores keep their own
// orders: the file store the engine's, PostgreSQL by time).
func sortedRuns(runs []store.Run) []runKey {
	out := make([]runKey, len(runs))
	for i, r := range runs {
		out[i] = runKeyOf(r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.slot != b.slot {
			return a.slot < b.slot
		}
		if a.attempt != b.attempt {
			return a.attempt < b.attempt
		}
		return a.at < b.at
	})
	return out
}

// runsNotIn describes the first submission of d that r does not hold as
// it is (same slot, attempt and time); "" if none.
func runsNotIn(d, r []store.Run) string {
	have := make(map[runKey]bool, len(r))
	for _, x := range r {
		have[runKeyOf(x)] = true
	}
	for _, x := range d {
		if !have[runKeyOf(x)] {
			return fmt.Sprintf("a recorded submission of slot %s, attempt %d, at %s", slot.FormatTime(x.Slot), x.Attempt, slot.FormatTime(x.At))
		}
	}
	return ""
}

// CountRuns counts the submissions recorded (celos_runs), all and those
// made before before (what a prune to before deletes), in one query: for
// celos db prune, which reports both.
func (db *DB) CountRuns(before time.Time) (old, all int, err error) {
	ctx, cancel := db.ctx()
	defer cancel()
	err = db.pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE submitted_at < $1), count(*) FROM celos_runs", before).Scan(&old, &all)
	if err != nil {
		return 0, 0, fmt.Errorf("PostgreSQL state store: count the submissions recorded: %w", pgError(err))
	}
	return old, all, nil
}
