package statedb

// Rerun markers: rerun/<workflow>/<day>/<time>.

import (
	"path/filepath"
	"sort"
	"time"

	"github.com/celos-go/celos/scheduler/store"

	"github.com/celos-go/celos/scheduler/slot"
)

// MarkRerun writes a rerun marker for the slot, stamped with now.
func (db *DB) MarkRerun(id slot.ID, now time.Time) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	k := key(id.Time)
	day, file := slotPath(keyTime(k))
	enc := encodeRerun(now)
	if err := db.writeFileAtomic(filepath.Join("rerun", id.Workflow, day), file, enc); err != nil {
		if db.fileHolds(filepath.Join(db.dir, "rerun", id.Workflow, day, file), enc) { // failed after the rename
			ix.reruns[k] = now.UTC()
		}
		return err
	}
	ix.reruns[k] = now.UTC()
	return nil
}

// UnmarkRerun removes a slot's rerun marker, if any.
func (db *DB) UnmarkRerun(id slot.ID) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	return removeMarker(db, ix.reruns, "rerun", id)
}

// removeMarker removes the file of a slot's entry in one of the per-slot
// areas beside state/ (rerun/, intent/) and then the index entry m holds
// for it; a slot without one is left as it is. db.mu is held.
func removeMarker[V any](db *DB, m map[int64]V, area string, id slot.ID) error {
	k := key(id.Time)
	if _, ok := m[k]; !ok {
		return nil
	}
	day, file := slotPath(keyTime(k))
	if err := db.removeFile(filepath.Join(area, id.Workflow, day), file); err != nil {
		return err
	}
	delete(m, k)
	return nil
}

// RerunMarks returns the rerun markers of workflow wf, oldest slot first.
// Expiry is the caller's decision (the engine drops a marker once its slot
// is final and either outside the window or expired; see UnmarkRerun).
func (db *DB) RerunMarks(wf string) ([]store.RerunMark, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	if len(ix.reruns) == 0 {
		return nil, nil
	}
	out := make([]store.RerunMark, 0, len(ix.reruns))
	for k, at := range ix.reruns {
		out = append(out, store.RerunMark{Slot: keyTime(k), At: at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot.Before(out[j].Slot) })
	return out, nil
}
