package statepg

// Slot states: reads from the index, writes in one transaction per call.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/slot"
)

// Get returns the stored state of a slot; found is false when it has none.
func (db *DB) Get(id slot.ID) (st slot.State, found bool, err error) {
	err = db.read(id.Workflow, func(ix *wfIndex) {
		k := key(id.Time)
		var r rec
		if r, found = ix.recs[k]; found {
			st = r.state(id.Workflow, k)
		}
	})
	return st, found, err
}

func (r rec) state(wf string, k int64) slot.State {
	return slot.State{ID: slot.ID{Workflow: wf, Time: keyTime(k)}, Status: r.status, ExternalID: r.ext, RetryCount: r.retry}
}

// Active returns the stored states of workflow wf that are not final,
// oldest first.
func (db *DB) Active(wf string) ([]slot.State, error) {
	var out []slot.State
	err := db.read(wf, func(ix *wfIndex) {
		out = make([]slot.State, 0, len(ix.active))
		for k := range ix.active {
			out = append(out, ix.recs[k].state(wf, k))
		}
	})
	sortStates(out)
	return out, err
}

// Count returns how many stored slots of workflow wf are in each status.
func (db *DB) Count(wf string) (map[slot.Status]int, error) {
	out := make(map[slot.Status]int)
	err := db.read(wf, func(ix *wfIndex) {
		for _, r := range ix.recs {
			out[r.status]++
		}
	})
	return out, err
}

// Range returns the stored states of workflow wf with times in [start,
// end), oldest first.
func (db *DB) Range(wf string, start, end time.Time) ([]slot.State, error) {
	lo, hi := key(start), key(end)
	if start.Sub(keyTime(lo)) > 0 {
		lo++
	}
	var out []slot.State
	err := db.read(wf, func(ix *wfIndex) {
		for k, r := range ix.recs {
			if k >= lo && k < hi {
				out = append(out, r.state(wf, k))
			}
		}
	})
	sortStates(out)
	return out, err
}

func sortStates(s []slot.State) {
	sort.Slice(s, func(i, j int) bool { return s[i].ID.Time.Before(s[j].ID.Time) })
}

// checkState refuses what the store cannot keep.
func checkState(st slot.State) error {
	if err := validWorkflow(st.ID.Workflow); err != nil {
		return fmt.Errorf("put %s: %w", st.ID, err)
	}
	if !st.Status.Valid() {
		return fmt.Errorf("PostgreSQL state store: put %s: invalid status %q", st.ID, st.Status)
	}
	if st.RetryCount < 0 || st.RetryCount > 1<<31-1 {
		return fmt.Errorf("PostgreSQL state store: put %s: retry count %d out of range", st.ID, st.RetryCount)
	}
	if strings.ContainsRune(st.ExternalID, 0) || !utf8.ValidString(st.ExternalID) {
		return fmt.Errorf("PostgreSQL state store: put %s: external ID is not valid UTF-8 text", st.ID)
	}
	return nil
}

// Put stores one slot state, durable when it returns. Writing the state a
// slot already has is a no-op.
func (db *DB) Put(st slot.State) error {
	if failed := db.PutStates([]slot.State{st}); failed != nil {
		for _, err := range failed {
			return err
		}
	}
	return nil
}

// PutStates writes states in one transaction, durable when it returns,
// and returns those that could not be written (each left as it was):
// invalid ones, and all of them when the transaction fails. When the
// fence refuses some of the workflows, the states of each workflow are
// written in a transaction of their own, so that only those of the fenced
// workflows are refused (each with an error wrapping ErrFenced). States
// equal to the stored ones are not written.
func (db *DB) PutStates(sts []slot.State) map[slot.ID]error {
	var failed map[slot.ID]error
	fail := func(id slot.ID, err error) {
		if failed == nil {
			failed = make(map[slot.ID]error)
		}
		failed[id] = err
	}
	// The last state given for a slot wins, as in a batch.
	byID := make(map[slot.ID]int, len(sts))
	var todo []slot.State
	for _, st := range sts {
		if err := checkState(st); err != nil {
			fail(st.ID, err)
			continue
		}
		st.ID.Time = ms(st.ID.Time)
		if i, ok := byID[st.ID]; ok {
			todo[i] = st
			continue
		}
		byID[st.ID] = len(todo)
		todo = append(todo, st)
	}
	if len(todo) == 0 {
		return failed
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	todo, err := db.changed(todo)
	if err != nil {
		for _, st := range todo {
			fail(st.ID, err)
		}
		return failed
	}
	if len(todo) == 0 {
		return failed
	}
	err = db.putStates(todo)
	if errors.Is(err, ErrFenced) && len(workflowsOf(todo)) > 1 {
		groups := make(map[string][]slot.State)
		for _, st := range todo {
			groups[st.ID.Workflow] = append(groups[st.ID.Workflow], st)
		}
		for _, g := range groups {
			if err := db.putStates(g); err != nil {
				for _, st := range g {
					fail(st.ID, err)
				}
			}
		}
		return failed
	}
	if err != nil {
		for _, st := range todo {
			fail(st.ID, err)
		}
	}
	return failed
}

// changed drops the states equal to the stored ones; db.wmu is held.
func (db *DB) changed(sts []slot.State) ([]slot.State, error) {
	if err := db.loadLocked(workflowsOf(sts)); err != nil {
		return sts, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	out := sts[:0:0]
	for _, st := range sts {
		if ix := db.wfs[st.ID.Workflow]; ix != nil {
			if r, ok := ix.recs[key(st.ID.Time)]; ok && r == (rec{st.Status, st.ExternalID, st.RetryCount}) {
				continue
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// putStates writes sts in one transaction (one statement) and follows
// with the index; db.wmu is held.
func (db *DB) putStates(sts []slot.State) error {
	n := len(sts)
	wfs, ts, status, ext, retry := make([]string, n), make([]time.Time, n), make([]string, n), make([]string, n), make([]int32, n)
	for i, st := range sts {
		wfs[i], ts[i], status[i], ext[i], retry[i] = st.ID.Workflow, st.ID.Time, string(st.Status), st.ExternalID, int32(st.RetryCount)
	}
	what := fmt.Sprintf("write %d slot states (%s, ...)", n, sts[0].ID)
	versions, err := db.writeTx(what, wfs, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, `INSERT INTO celos_slots (workflow, slot_time, status, external_id, retry_count)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::int[])
ON CONFLICT (workflow, slot_time) DO UPDATE
SET status = excluded.status, external_id = excluded.external_id, retry_count = excluded.retry_count`,
			wfs, ts, status, ext, retry)
		return tag.RowsAffected(), err
	})
	if err != nil {
		return err
	}
	byWf := make(map[string][]slot.State, len(versions))
	for _, st := range sts {
		byWf[st.ID.Workflow] = append(byWf[st.ID.Workflow], st)
	}
	db.follow(versions, func(wf string, ix *wfIndex) {
		for _, st := range byWf[wf] {
			ix.setRec(key(st.ID.Time), rec{st.Status, st.ExternalID, st.RetryCount})
		}
	})
	return nil
}

func workflowsOf(sts []slot.State) []string {
	seen := make(map[string]bool)
	var out []string
	for _, st := range sts {
		if !seen[st.ID.Workflow] {
			seen[st.ID.Workflow] = true
			out = append(out, st.ID.Workflow)
		}
	}
	return out
}
