package statedb

// Listing everything the database holds, for copying it to another store
// (celos db migrate, scheduler/statepg).

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	"github.com/celos-go/celos/scheduler/store"
)

// AllWorkflows lists, sorted, every workflow that has a record of any
// kind: slot states, rerun markers, submit intents, a paused flag, an
// owner record or a record of submissions that is not empty.
func (db *DB) AllWorkflows() ([]string, error) {
	return db.workflowsIn([]string{"state", "rerun", "intent", "owner", "paused", "run"})
}

// workflowsIn lists, sorted, the workflows with a record in the areas
// given: a directory in state, rerun and intent, a file in owner, paused
// and run (a record of submissions that is not empty).
func (db *DB) workflowsIn(areas []string) ([]string, error) {
	seen := make(map[string]bool)
	for _, area := range areas {
		entries, err := db.readDir(area)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("state database: %w", err)
		}
		for _, e := range entries {
			isDir := area != "owner" && area != "paused" && area != "run"
			if e.IsDir() != isDir || validWorkflow(e.Name()) != nil || seen[e.Name()] {
				continue
			}
			if area == "run" {
				// An empty record ([]) holds nothing, as none in
				// PostgreSQL; an unreadable one is listed (its error
				// is the copy's).
				if runs, err := db.Runs(e.Name()); err == nil && len(runs) == 0 {
					continue
				}
			}
			seen[e.Name()] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// Intents returns the submit intents of workflow wf by slot time.
func (db *DB) Intents(wf string) (map[time.Time]store.Intent, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	out := make(map[time.Time]store.Intent, len(ix.intents))
	for k, in := range ix.intents {
		out[keyTime(k)] = in
	}
	return out, nil
}

// RegisterBuckets lists the register buckets that hold a key, sorted (a
// bucket's directory stays when its last key is removed: it is no bucket,
// as in PostgreSQL, where a bucket is its rows).
func (db *DB) RegisterBuckets() ([]string, error) {
	entries, err := db.readDir("register")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || validName("bucket", e.Name()) != nil {
			continue
		}
		keys, err := db.RegisterKeys(e.Name(), "")
		if err != nil {
			return nil, err
		}
		if len(keys) > 0 {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
