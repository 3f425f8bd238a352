package statepg

// Problems shared between instances (migration 0004, docs/ha.md): the
// instance that steps a workflow publishes the set of its problems to
// celos_problems, fenced like its other writes, and every instance keeps
// the published sets in memory, read by Refresh in its one statement
// (only the rows written since the previous one, as for celos_workflows).

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler"
)

// problemCache is the published problems as this instance last read or
// wrote them.
type problemCache struct {
	mu sync.Mutex
	// full: every row was read since Open or Reload (else the next
	// Refresh reads them all).
	full bool
	sets map[string][]scheduler.Problem // non-empty sets only
}

// PublishProblems replaces the published problems of each workflow of set
// (an empty or nil list: none) in one transaction, fenced: refused
// (wrapping ErrFenced) when this instance no longer holds the lease of one
// of them.
func (db *DB) PublishProblems(set map[string][]scheduler.Problem) error {
	return db.putProblems("publish the problems", set, true)
}

// ClearPublished empties the published problems of wfs, without the fence:
// for workflows that were removed, which no instance steps any more.
func (db *DB) ClearPublished(wfs []string) error {
	set := make(map[string][]scheduler.Problem, len(wfs))
	for _, wf := range wfs {
		set[wf] = nil
	}
	return db.putProblems("clear the problems", set, false)
}

func (db *DB) putProblems(what string, set map[string][]scheduler.Problem, fenced bool) error {
	if len(set) == 0 {
		return nil
	}
	wfs := make([]string, 0, len(set))
	for wf := range set {
		if err := validWorkflow(wf); err != nil {
			return fmt.Errorf("PostgreSQL state store: %s: %w", what, err)
		}
		wfs = append(wfs, wf)
	}
	sort.Strings(wfs) // two instances lock rows in the same order
	docs := make([]string, len(wfs))
	for i, wf := range wfs {
		ps := set[wf]
		if ps == nil {
			ps = []scheduler.Problem{}
		}
		b, err := json.Marshal(ps)
		if err != nil {
			return fmt.Errorf("PostgreSQL state store: %s of workflow %s: %w", what, wf, err)
		}
		docs[i] = string(b)
	}
	db.wmu.Lock() // a Refresh does not install older sets meanwhile
	defer db.wmu.Unlock()
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return errClosed
	}
	ctx, cancel := db.ctx()
	defer cancel()
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if fenced {
			if err := db.checkFence(ctx, tx, wfs); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO celos_problems AS p (workflow, problems)
SELECT w, d::jsonb FROM unnest($1::text[], $2::text[]) AS u(w, d)
ON CONFLICT (workflow) DO UPDATE SET problems = EXCLUDED.problems`, wfs, docs)
		return err
	})
	if err != nil {
		return fmt.Errorf("PostgreSQL state store: %s of %d workflows (%s, ...): %w", what, len(wfs), wfs[0], pgError(err))
	}
	db.writes.Add(int64(len(wfs)))
	db.probs.mu.Lock()
	for wf, ps := range set {
		db.probs.setLocked(wf, append([]scheduler.Problem(nil), ps...))
	}
	db.probs.mu.Unlock()
	return nil
}

func (c *problemCache) setLocked(wf string, ps []scheduler.Problem) {
	if len(ps) == 0 {
		delete(c.sets, wf)
		return
	}
	if c.sets == nil {
		c.sets = make(map[string][]scheduler.Problem)
	}
	c.sets[wf] = ps
}

// PublishedProblems returns the problems published for wf ("": every
// workflow), as of the last Refresh or this instance's own publication,
// in the order published (workflows by id).
func (db *DB) PublishedProblems(wf string) []scheduler.Problem {
	db.probs.mu.Lock()
	defer db.probs.mu.Unlock()
	if wf != "" {
		return append([]scheduler.Problem(nil), db.probs.sets[wf]...)
	}
	wfs := make([]string, 0, len(db.probs.sets))
	for w := range db.probs.sets {
		wfs = append(wfs, w)
	}
	sort.Strings(wfs)
	var out []scheduler.Problem
	for _, w := range wfs {
		out = append(out, db.probs.sets[w]...)
	}
	return out
}

// PublishedWorkflows returns the workflows with published problems.
func (db *DB) PublishedWorkflows() []string {
	db.probs.mu.Lock()
	defer db.probs.mu.Unlock()
	out := make([]string, 0, len(db.probs.sets))
	for wf := range db.probs.sets {
		out = append(out, wf)
	}
	sort.Strings(out)
	return out
}

// isFull reports whether every row was read since Open or Reload (else
// the next Refresh reads them all).
func (c *problemCache) isFull() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.full
}

// apply installs the sets a Refresh read: every set when all (the others
// are gone), else those written since the previous one.
func (c *problemCache) apply(read map[string][]scheduler.Problem, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if all {
		c.sets, c.full = nil, true
	}
	for wf, ps := range read {
		c.setLocked(wf, ps)
	}
}

// readAllProblems reads every row of celos_problems (a Refresh that found
// the server's transaction ids gone backwards); db.wmu is held.
func (db *DB) readAllProblems(ctx context.Context) error {
	rows, err := db.pool.Query(ctx, "SELECT workflow, problems::text FROM celos_problems")
	if err != nil {
		return err
	}
	read := make(map[string][]scheduler.Problem)
	var wf, doc string
	if _, err := pgx.ForEachRow(rows, []any{&wf, &doc}, func() error {
		read[wf] = decodeProblems(wf, doc)
		return nil
	}); err != nil {
		return err
	}
	db.reads.Add(int64(len(read)))
	db.probs.apply(read, true)
	return nil
}

// decodeProblems reads a row of celos_problems; one that cannot be read
// (written by hand) is shown as a problem of its own, not as an error of
// every Refresh.
func decodeProblems(wf, doc string) []scheduler.Problem {
	var ps []scheduler.Problem
	if err := json.Unmarshal([]byte(doc), &ps); err != nil {
		return []scheduler.Problem{{Workflow: wf, Op: "state", Error: fmt.Sprintf("the problems published for this workflow in celos_problems are unreadable: %v", err)}}
	}
	for i := range ps {
		ps[i].Workflow = wf
		ps[i].Slot, ps[i].At = ps[i].Slot.UTC(), ps[i].At.UTC()
	}
	return ps
}

// forgetProblems makes the next Refresh read every published problem
// (Reload).
func (db *DB) forgetProblems() {
	db.probs.mu.Lock()
	db.probs.full = false
	db.probs.mu.Unlock()
}
