package statepg

// The recent submissions of workflows with run constraints (migration
// 0006, store.Run): read once when an engine starts stepping a workflow,
// replaced after a step that submitted for it. No index holds them.

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/store"
)

// Runs returns the submissions recorded for workflow wf, oldest first
// (nil when there are none). It asks the database, not the index: the
// instance that takes a workflow over reads what the previous owner
// recorded last.
func (db *DB) Runs(wf string) ([]store.Run, error) {
	runs, err := db.RunsOf([]string{wf})
	return runs[wf], err
}

// RunsOf returns the submissions recorded for each workflow of wfs that
// has any, oldest first, in one query: what an engine that takes many
// workflows over reads in its first step, instead of one Runs per
// workflow. A workflow without a record is not in the map.
func (db *DB) RunsOf(wfs []string) (map[string][]store.Run, error) {
	for _, wf := range wfs {
		if err := validWorkflow(wf); err != nil {
			return nil, err
		}
	}
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	what := fmt.Sprintf("%d workflows", len(wfs))
	if len(wfs) == 1 {
		what = wfs[0]
	}
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT workflow, slot_time, attempt, submitted_at FROM celos_runs WHERE workflow = ANY($1)
ORDER BY workflow, submitted_at, slot_time, attempt`, wfs)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: read the submissions of %s: %w", what, pgError(err))
	}
	defer rows.Close()
	out := make(map[string][]store.Run)
	n := 0
	for rows.Next() {
		var wf string
		var r store.Run
		if err := rows.Scan(&wf, &r.Slot, &r.Attempt, &r.At); err != nil {
			return nil, fmt.Errorf("PostgreSQL state store: read the submissions of %s: %w", what, pgError(err))
		}
		r.Slot, r.At = r.Slot.UTC(), r.At.UTC()
		out[wf] = append(out[wf], r)
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: read the submissions of %s: %w", what, pgError(err))
	}
	db.reads.Add(int64(n))
	return out, nil
}

// PutRuns replaces the recorded submissions of each workflow of set in one
// transaction, fenced: when the fence refuses some of several workflows,
// each is written in a transaction of its own so that only those are
// refused (wrapping ErrFenced). It returns the workflows whose record
// could not be written.
func (db *DB) PutRuns(set map[string][]store.Run) map[string]error {
	failed := make(map[string]error)
	wfs := make([]string, 0, len(set))
	for wf, runs := range set {
		if err := validWorkflow(wf); err != nil {
			failed[wf] = err
			continue
		}
		for _, r := range runs {
			if r.Attempt < 0 {
				failed[wf] = fmt.Errorf("%w: submission of %s at %s: negative attempt", store.ErrBadName, wf, r.Slot)
				break
			}
		}
		if failed[wf] == nil {
			wfs = append(wfs, wf)
		}
	}
	if len(wfs) == 0 {
		return nilIfEmpty(failed)
	}
	sort.Strings(wfs) // two instances lock rows in the same order
	err := db.putRuns(wfs, set)
	switch {
	case err == nil:
	case errors.Is(err, ErrFenced) && len(wfs) > 1:
		for _, wf := range wfs {
			if err := db.putRuns([]string{wf}, set); err != nil {
				failed[wf] = err
			}
		}
	default:
		for _, wf := range wfs {
			failed[wf] = err
		}
	}
	return nilIfEmpty(failed)
}

func (db *DB) putRuns(wfs []string, set map[string][]store.Run) error {
	var rw []string
	var slots, ats []time.Time
	var attempts []int32
	for _, wf := range wfs {
		seen := make(map[[2]int64]int, len(set[wf]))
		for _, r := range set[wf] {
			k := [2]int64{key(r.Slot), int64(r.Attempt)}
			if i, dup := seen[k]; dup { // one row per attempt: the later time
				if at := store.CeilMilli(r.At); at.After(ats[i]) {
					ats[i] = at
				}
				continue
			}
			seen[k] = len(rw)
			rw = append(rw, wf)
			slots = append(slots, ms(r.Slot))
			attempts = append(attempts, int32(r.Attempt))
			ats = append(ats, store.CeilMilli(r.At))
		}
	}
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return errClosed
	}
	ctx, cancel := db.ctx()
	defer cancel()
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if err := db.checkFence(ctx, tx, wfs); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM celos_runs WHERE workflow = ANY($1)", wfs); err != nil {
			return err
		}
		if len(rw) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO celos_runs (workflow, slot_time, attempt, submitted_at)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::integer[], $4::timestamptz[])`,
			rw, slots, attempts, ats)
		return err
	})
	if err != nil {
		return fmt.Errorf("PostgreSQL state store: record the submissions of %d workflows (%s, ...): %w", len(wfs), wfs[0], pgError(err))
	}
	db.writes.Add(int64(len(rw)))
	return nil
}
