package statepg

// Pruning old final slots, intents and expired rerun markers.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/store"
)

// MinRetention is the shortest history Prune keeps: the engine's window
// and a day more (as the file store's statedb.MinRetention).
const MinRetention = scheduler.Window + 24*time.Hour

// Workflows lists the workflows that have state, sorted.
func (db *DB) Workflows() ([]string, error) {
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT workflow FROM celos_workflows ORDER BY workflow COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: list workflows: %w", pgError(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: list workflows: %w", pgError(err))
	}
	return out, nil
}

// Prune deletes the final slots older than before, the submit intents of
// final slots (or slots without a state) older than before and the expired
// rerun markers of final slots, in
// every workflow, and the submissions recorded (celos_runs) made before
// before; before must be at least MinRetention before now. It
// returns the number of slot states deleted.
func (db *DB) Prune(before, now time.Time) (int, error) {
	if err := store.CheckRetention(before, now, MinRetention); err != nil {
		return 0, err
	}
	return db.PruneBefore(now, func(string) time.Time { return before })
}

// PruneBefore is Prune with a limit per workflow (see statedb.PruneBefore):
// each workflow is pruned in a transaction of its own, under the fence.
func (db *DB) PruneBefore(now time.Time, before func(wf string) time.Time) (int, error) {
	wfs, err := db.Workflows()
	if err != nil {
		return 0, err
	}
	n, err := store.PruneEach(wfs, now, MinRetention, before, func(wf string, b time.Time) (int, error) {
		return db.pruneWorkflow(wf, b, now)
	})
	return n, errors.Join(err, db.pruneRuns(now, before))
}

// pruneRuns deletes the submissions made before before(wf) from
// celos_runs, of every workflow that has some (a workflow whose limit is
// inside MinRetention, reported by the prune of its slots, is left
// alone). The owner's engine never needs them (its look-back is at most
// the window) and replaces its record whole, so no fence is needed.
func (db *DB) pruneRuns(now time.Time, before func(wf string) time.Time) error {
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT workflow COLLATE "C" FROM celos_runs ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("PostgreSQL state store: list the records of submissions: %w", pgError(err))
	}
	wfs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("PostgreSQL state store: list the records of submissions: %w", pgError(err))
	}
	var errs []error
	for _, wf := range wfs {
		b := before(wf)
		if b.After(now.Add(-MinRetention)) {
			continue
		}
		ctx, cancel := db.ctx()
		tag, err := db.pool.Exec(ctx, "DELETE FROM celos_runs WHERE workflow = $1 AND submitted_at < $2", wf, b)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("PostgreSQL state store: prune the submissions of %s: %w", wf, pgError(err)))
			continue
		}
		db.writes.Add(tag.RowsAffected())
	}
	return errors.Join(errs...)
}

func (db *DB) pruneWorkflow(wf string, before, now time.Time) (int, error) {
	var states int64
	expired := now.Add(-store.RerunExpiry)
	err := db.slotWrite("prune "+wf, wf, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM celos_slots WHERE workflow = $1 AND slot_time < $2
AND status IN ('SUCCESS', 'FAILURE', 'WAIT_TIMEOUT', 'KILLED')`, wf, before)
		if err != nil {
			return 0, err
		}
		states = tag.RowsAffected()
		// Not the intent of a slot in progress: a READY slot's is a
		// submission that may have reached the service (see statedb).
		tag, err = tx.Exec(ctx, `DELETE FROM celos_intents i WHERE workflow = $1 AND slot_time < $2
AND NOT EXISTS (SELECT 1 FROM celos_slots s WHERE s.workflow = i.workflow AND s.slot_time = i.slot_time
  AND s.status IN ('WAITING', 'READY', 'RUNNING'))`, wf, before)
		if err != nil {
			return 0, err
		}
		n := states + tag.RowsAffected()
		tag, err = tx.Exec(ctx, `DELETE FROM celos_rerun_marks m WHERE workflow = $1 AND marked_at < $2
AND NOT EXISTS (SELECT 1 FROM celos_slots s WHERE s.workflow = m.workflow AND s.slot_time = m.slot_time
  AND s.status IN ('WAITING', 'READY', 'RUNNING'))`, wf, expired)
		return n + tag.RowsAffected(), err
	}, func(ix *wfIndex) {
		lim := key(before)
		for k, r := range ix.recs {
			if k < lim && r.status.Final() {
				delete(ix.recs, k)
			}
		}
		for k := range ix.intents {
			if r, ok := ix.recs[k]; k < lim && (!ok || r.status.Final()) {
				delete(ix.intents, k)
			}
		}
		for k, at := range ix.reruns {
			if r, ok := ix.recs[k]; (!ok || r.status.Final()) && at.Before(expired) {
				delete(ix.reruns, k)
			}
		}
	})
	return int(states), err
}
