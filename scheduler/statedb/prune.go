package statedb

// Pruning old final slots, intents and expired markers.

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/store"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler"
)

// Workflows lists the workflows that have a state directory, sorted.
func (db *DB) Workflows() ([]string, error) {
	entries, err := db.readDir("state")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && validWorkflow(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// prunable lists, sorted, the workflows with anything Prune may remove:
// slot states, submit intents or rerun markers (a workflow may have
// intents or markers and no slot state: an intent left by a crash before
// its slot was written, of a workflow since undeployed).
func (db *DB) prunable() ([]string, error) {
	return db.workflowsIn([]string{"state", "intent", "rerun"})
}

// MinRetention is the shortest history Prune keeps: the engine's window
// (scheduler.Window, 7 days) and a day more, so that a pruned final slot
// can never reappear as WAITING.
const MinRetention = scheduler.Window + 24*time.Hour

// Prune deletes the files of final slots (SUCCESS, FAILURE, WAIT_TIMEOUT,
// KILLED) older than before, the submit intents of such slots (or of slots
// without a record) older than before and expired
// rerun markers of final slots, in every workflow, and removes day directories left empty.
// It drops the submissions made before before from every record of
// submissions (run/), removing a record left empty.
// before must be at least MinRetention before now. Slots that are not final are
// kept whatever their age. It returns the number of slot files deleted.
func (db *DB) Prune(before, now time.Time) (int, error) {
	if err := store.CheckRetention(before, now, MinRetention); err != nil {
		return 0, err
	}
	return db.PruneBefore(now, func(string) time.Time { return before })
}

// PruneBefore is Prune with a limit per workflow: the files of workflow wf
// older than before(wf) (for a workflow whose states a trigger reads far
// back: see trigger.LookBacks). Every limit must be at least MinRetention
// before now; a workflow whose limit is not is left alone and reported.
func (db *DB) PruneBefore(now time.Time, before func(wf string) time.Time) (int, error) {
	wfs, err := db.prunable()
	if err != nil {
		return 0, err
	}
	n, err := store.PruneEach(wfs, now, MinRetention, before, func(wf string, b time.Time) (int, error) {
		return db.pruneWorkflow(wf, b, now)
	})
	return n, errors.Join(err, db.pruneRuns(now, before))
}

// pruneChunk is how many files pruneWorkflow removes per hold of db.mu:
// steps and API reads wait for at most one chunk, not a whole workflow's
// history.
const pruneChunk = 256

// pruneFile is one file pruneWorkflow may remove.
type pruneFile struct {
	kind string // "state", "intent" or "rerun"
	k    int64
}

// intentStale reports whether the submit intent of slot k is left over:
// its slot is final, or has no record (and none that cannot be read). The
// intent of a READY slot, however old the slot, is a submission that may
// have reached the service: the next step asks the service about it, so
// a prune keeps it.
func (ix *wfIndex) intentStale(k int64) bool {
	r, ok := ix.recs[k]
	if !ok {
		return ix.corrupt[k] == nil
	}
	return r.status.Final()
}

func (db *DB) pruneWorkflow(wf string, before, now time.Time) (int, error) {
	lim := key(before)
	// The candidates, picked under the lock; each is checked again when it
	// is removed (the lock is released between chunks).
	db.mu.Lock()
	ix, err := db.index(wf)
	if err != nil {
		db.mu.Unlock()
		return 0, err
	}
	var cands []pruneFile
	for k, at := range ix.reruns {
		if r, ok := ix.recs[k]; (!ok || r.status.Final()) && (store.RerunMark{At: at}).Expired(now) {
			cands = append(cands, pruneFile{"rerun", k})
		}
	}
	for k, r := range ix.recs {
		if k < lim && r.status.Final() {
			cands = append(cands, pruneFile{"state", k})
		}
	}
	for k := range ix.intents {
		if k < lim && ix.intentStale(k) {
			cands = append(cands, pruneFile{"intent", k})
		}
	}
	db.mu.Unlock()

	// The removals, without a directory sync each: every touched
	// directory is synced once at the end. Every directory is opened
	// without following links (dirfd.go).
	ds := db.dirSet()
	defer ds.close()
	touched := make(map[string]bool)
	n := 0
	var firstErr error
	for start := 0; start < len(cands) && firstErr == nil; start += pruneChunk {
		db.mu.Lock()
		ix, err := db.index(wf)
		if err != nil {
			db.mu.Unlock()
			firstErr = err
			break
		}
		for _, c := range cands[start:min(start+pruneChunk, len(cands))] {
			switch c.kind {
			case "rerun":
				at, ok := ix.reruns[c.k]
				r, live := ix.recs[c.k]
				if !ok || (live && !r.status.Final()) || !(store.RerunMark{At: at}).Expired(now) {
					continue
				}
			case "state":
				if r, ok := ix.recs[c.k]; !ok || !r.status.Final() {
					continue
				}
			case "intent":
				if _, ok := ix.intents[c.k]; !ok || !ix.intentStale(c.k) {
					continue
				}
			}
			day, file := slotPath(keyTime(c.k))
			dir := filepath.Join(c.kind, wf, day)
			if err := db.removeIn(ds, dir, file, false); err != nil {
				firstErr = err
				break
			}
			touched[dir] = true
			switch c.kind {
			case "rerun":
				delete(ix.reruns, c.k)
			case "state":
				delete(ix.recs, c.k)
				n++
			case "intent":
				delete(ix.intents, c.k)
			}
		}
		db.mu.Unlock()
	}
	// A directory syncs on its own (no lock needed); one removed since
	// (left empty below, or by another prune) is skipped.
	for dir := range touched {
		fd, err := ds.open(dir, mkNone)
		if err == nil {
			err = db.syncDirFD(fd)
		}
		if err != nil && !isNotExist(err) && firstErr == nil {
			firstErr = fmt.Errorf("state database: sync %s: %w", filepath.Join(db.dir, dir), err)
		}
	}
	if firstErr != nil {
		return n, firstErr
	}

	db.removeEmptyDays(ds, wf, touched, before)
	return n, nil
}

// removeEmptyDays removes the day directories of workflow wf left empty:
// those of touched (relative to the root) in state/, and every empty one
// of intent/ and rerun/ of a day before the limit.
// Submit intents and rerun markers are transient and leave their day
// directories empty once the files are gone: so that neither grows with
// the history. A directory is removed relative to its parent's descriptor
// (AT_REMOVEDIR: a link in its place is not followed, and only an empty
// directory goes).
func (db *DB) removeEmptyDays(ds *dirSet, wf string, touched map[string]bool, before time.Time) {
	db.mu.Lock()
	defer db.mu.Unlock()
	rmdir := func(parent, name string) {
		if fd, err := ds.open(parent, mkNone); err == nil {
			unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		}
	}
	for dir := range touched {
		if strings.HasPrefix(dir, "state"+string(filepath.Separator)) {
			rmdir(filepath.Dir(dir), filepath.Base(dir))
		}
	}
	limDay, _ := slotPath(before)
	for _, kind := range []string{"intent", "rerun"} {
		entries, err := db.readDir(filepath.Join(kind, wf))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if _, perr := time.Parse(dayLayout, e.Name()); perr != nil || !e.IsDir() || e.Name() >= limDay {
				continue
			}
			rmdir(filepath.Join(kind, wf), e.Name())
		}
	}
}
