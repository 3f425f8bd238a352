package statedb

// Slot states: reads from the index, durable writes one by one.

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// Get returns the stored state of a slot; found is false when it has no
// record. A corrupt file gives an error wrapping ErrCorrupt and naming it.
func (db *DB) Get(id slot.ID) (slot.State, bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return slot.State{}, false, err
	}
	k := key(id.Time)
	if err := ix.corrupt[k]; err != nil {
		return slot.State{}, false, err
	}
	r, ok := ix.recs[k]
	if !ok {
		return slot.State{}, false, nil
	}
	return r.state(id.Workflow, k), true, nil
}

func (r rec) state(wf string, k int64) slot.State {
	return slot.State{ID: slot.ID{Workflow: wf, Time: keyTime(k)}, Status: r.status, ExternalID: r.ext, RetryCount: r.retry}
}

// Put stores a slot state. Writing the state a slot already has is a no-op
// (no file is written). On error the stored state is unchanged, unless the
// file was replaced before the error (a failed directory sync): the index
// then holds what the file holds.
func (db *DB) Put(st slot.State) error {
	if !st.Status.Valid() {
		return fmt.Errorf("state database: put %s: invalid status %q", st.ID, st.Status)
	}
	if st.RetryCount < 0 {
		return fmt.Errorf("state database: put %s: negative retry count", st.ID)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(st.ID.Workflow)
	if err != nil {
		return err
	}
	k := key(st.ID.Time)
	r := rec{status: st.Status, ext: st.ExternalID, retry: st.RetryCount}
	if old, ok := ix.recs[k]; ok && old == r && ix.corrupt[k] == nil {
		return nil
	}
	t := keyTime(k)
	st.ID.Time = t
	day, file := slotPath(t)
	enc := EncodeState(st)
	if err := db.writeFileAtomic(filepath.Join("state", st.ID.Workflow, day), file, enc); err != nil {
		// The write may have failed after its rename (syncing the
		// directory): the file then holds the new state, and so must the
		// index, or it would disagree with the disk until a restart.
		if db.fileHolds(filepath.Join(db.dir, "state", st.ID.Workflow, day, file), enc) {
			ix.setRec(k, r)
			delete(db.problems, filepath.ToSlash(filepath.Join("state", st.ID.Workflow, day, file)))
		}
		return err
	}
	ix.setRec(k, r)
	delete(db.problems, filepath.ToSlash(filepath.Join("state", st.ID.Workflow, day, file)))
	return nil
}

// fileHolds reports whether the file at path holds exactly data: after a
// failed atomic write, whether the rename happened (the index must then
// follow the disk).
func (db *DB) fileHolds(path string, data []byte) bool {
	rel, err := filepath.Rel(db.dir, path)
	if err != nil {
		return false
	}
	got, err := db.readFile(rel)
	return err == nil && bytes.Equal(got, data)
}

// Range returns the stored states of workflow wf with times in [start,
// end), oldest first. Corrupt slots are left out (Get reports them).
func (db *DB) Range(wf string, start, end time.Time) ([]slot.State, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	lo, hi := key(start), key(end)
	if start.Sub(keyTime(lo)) > 0 { // start had a sub-millisecond part
		lo++
	}
	var out []slot.State
	for k, r := range ix.recs {
		if k >= lo && k < hi {
			out = append(out, r.state(wf, k))
		}
	}
	sortStates(out)
	return out, nil
}

// Active returns the stored states of workflow wf that are not final
// (WAITING, READY, RUNNING), at any time, oldest first.
func (db *DB) Active(wf string) ([]slot.State, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	out := make([]slot.State, 0, len(ix.active))
	for k := range ix.active {
		out = append(out, ix.recs[k].state(wf, k))
	}
	sortStates(out)
	return out, nil
}

// Count returns how many stored slots of workflow wf are in each status.
func (db *DB) Count(wf string) (map[slot.Status]int, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(wf)
	if err != nil {
		return nil, err
	}
	out := make(map[slot.Status]int)
	for _, r := range ix.recs {
		out[r.status]++
	}
	return out, nil
}

func sortStates(s []slot.State) {
	sort.Slice(s, func(i, j int) bool { return s[i].ID.Time.Before(s[j].ID.Time) })
}
