package statedb

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/celos-go/celos/scheduler/store"
)

// The recent submissions of a workflow with run constraints (store.Run,
// celos only; Celos ignores the directory) are one file per workflow,
// replaced whole at each step that submits for it:
//
//	<dir>/run/<workflow>   [{"slot":"…","attempt":0,"at":"…"}, …]

// maxRunsFile bounds a record of submissions (a minutely workflow with a
// look-back of the whole 7-day window: about 10,000 runs of 80 bytes).
const maxRunsFile = 4 << 20

// Runs returns the submissions recorded for workflow wf, oldest first,
// nil when there are none. A record that cannot be read or parsed is an error naming
// the file (not its content), and is reported in Problems.
func (db *DB) Runs(wf string) ([]store.Run, error) {
	if err := validWorkflow(wf); err != nil {
		return nil, err
	}
	rel := filepath.Join("run", wf)
	path := filepath.Join(db.dir, rel)
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, errClosed
	}
	// Through the directories opened one by one, no link followed (a
	// run directory swapped for a link is refused, named), as the other
	// records are read.
	data, err := db.readFileMax(rel, maxRunsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		db.problems[rel] = trimPath(err, path)
		return nil, fmt.Errorf("state database: read the record of submissions %s: %s", path, db.problems[rel])
	}
	db.reads.Add(1)
	var runs []store.Run
	if err := json.Unmarshal(data, &runs); err != nil || !validRuns(runs) {
		db.problems[rel] = `not a record of submissions (want [{"slot":...,"attempt":...,"at":...}])`
		return nil, fmt.Errorf("%w: %s: %s", store.ErrCorrupt, path, db.problems[rel])
	}
	delete(db.problems, rel)
	if len(runs) == 0 {
		return nil, nil
	}
	sortRuns(runs) // a record an earlier version wrote in the engine's order
	return runs, nil
}

// sortRuns orders submissions oldest first (then by slot and attempt), as
// both stores return them.
func sortRuns(runs []store.Run) {
	slices.SortStableFunc(runs, func(a, b store.Run) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if c := a.Slot.Compare(b.Slot); c != 0 {
			return c
		}
		return cmp.Compare(a.Attempt, b.Attempt)
	})
}

func validRuns(runs []store.Run) bool {
	for _, r := range runs {
		if r.Slot.IsZero() || r.At.IsZero() || r.Attempt < 0 {
			return false
		}
	}
	return true
}

// PutRuns replaces the record of submissions of each workflow of set,
// together: every file is written to a temporary file, one syncfs makes
// them durable, they are renamed into place and a second syncfs makes the
// renames durable. It returns the workflows whose record could not be
// written, with the reason.
func (db *DB) PutRuns(set map[string][]store.Run) map[string]error {
	db.runsMu.Lock()
	defer db.runsMu.Unlock()
	return db.putRuns(set)
}

// putRuns is PutRuns under runsMu.
func (db *DB) putRuns(set map[string][]store.Run) map[string]error {
	failed := make(map[string]error)
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		for wf := range set {
			failed[wf] = errClosed
		}
		return failed
	}
	out := make(map[string][]store.Run, len(set))
	for wf, runs := range set {
		rs := make([]store.Run, len(runs))
		for i, r := range runs {
			rs[i] = store.Run{Slot: r.Slot.UTC(), Attempt: r.Attempt, At: store.CeilMilli(r.At)}
		}
		sortRuns(rs)
		out[wf] = rs
	}
	writeRecords(db, "run", "the submissions", out, failed)
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// runWorkflows lists the workflows that have a record of submissions.
func (db *DB) runWorkflows() ([]string, error) {
	entries, err := db.readDir("run")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && validWorkflow(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// pruneRuns drops the submissions older than before(wf) from every record
// of submissions, and removes a record left empty; a workflow whose limit
// is inside minRetention (reported by the prune of its slots) is left
// alone. A record with nothing to drop is not rewritten. The callers'
// limits keep what run constraints count (the server's pruneLimits, celos
// db prune's check).
func (db *DB) pruneRuns(now time.Time, before func(wf string) time.Time) error {
	wfs, err := db.runWorkflows()
	if err != nil {
		return err
	}
	var errs []error
	for _, wf := range wfs {
		b := before(wf)
		if b.After(now.Add(-MinRetention)) {
			continue
		}
		if err := db.pruneRunsOf(wf, b); err != nil {
			errs = append(errs, fmt.Errorf("prune the record of submissions of %s: %w", wf, err))
		}
	}
	return errors.Join(errs...)
}

func (db *DB) pruneRunsOf(wf string, before time.Time) error {
	db.runsMu.Lock()
	defer db.runsMu.Unlock()
	runs, err := db.Runs(wf)
	if err != nil {
		return err
	}
	kept := make([]store.Run, 0, len(runs))
	for _, r := range runs {
		if !r.At.Before(before) {
			kept = append(kept, r)
		}
	}
	switch {
	case len(kept) == len(runs) && len(runs) > 0:
		return nil
	case len(kept) == 0:
		ds := db.dirSet()
		defer ds.close()
		return db.removeIn(ds, "run", wf, true)
	}
	for _, err := range db.putRuns(map[string][]store.Run{wf: kept}) {
		return err
	}
	return nil
}
