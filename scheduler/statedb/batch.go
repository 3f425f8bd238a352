package statedb

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler/slot"
)

// Batch groups slot writes so that they cost two file-system syncs in all
// instead of two fsyncs each: a step that moves 1,000 slots would
// otherwise spend seconds in fsync. A state put in a batch is visible to
// Get at once; Commit makes the batch durable and atomic per file: every
// state goes to a temporary file in its directory, one syncfs(2) makes
// their contents durable, they are renamed over their targets, and a
// second syncfs makes the renames durable. A state whose write fails is
// taken back out of the index (Commit reports it); the others stand.
//
// A batch is for the engine's step (one goroutine); the writes that must be
// durable before something else happens (a submit intent, a RUNNING state)
// use Put.
type Batch struct {
	db    *DB
	items []batchItem
	index map[slot.ID]int
}

type batchItem struct {
	st      slot.State
	had     bool // the slot had a record before the batch
	old     rec
	tmp     string
	err     error
	written bool
}

// Batch starts a batch.
func (db *DB) Batch() *Batch { return &Batch{db: db, index: make(map[slot.ID]int)} }

// Len is the number of slots queued.
func (b *Batch) Len() int { return len(b.items) }

// Put queues st and shows it to readers at once. A state equal to the
// stored one is not queued.
func (b *Batch) Put(st slot.State) error {
	if !st.Status.Valid() {
		return fmt.Errorf("state database: put %s: invalid status %q", st.ID, st.Status)
	}
	if st.RetryCount < 0 {
		return fmt.Errorf("state database: put %s: negative retry count", st.ID)
	}
	db := b.db
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(st.ID.Workflow)
	if err != nil {
		return err
	}
	k := key(st.ID.Time)
	st.ID.Time = keyTime(k)
	r := rec{status: st.Status, ext: st.ExternalID, retry: st.RetryCount}
	if i, ok := b.index[st.ID]; ok {
		b.items[i].st = st
	} else {
		if old, ok := ix.recs[k]; ok && old == r && ix.corrupt[k] == nil {
			return nil
		}
		old, had := ix.recs[k]
		b.index[st.ID] = len(b.items)
		b.items = append(b.items, batchItem{st: st, had: had, old: old})
	}
	ix.setRec(k, r)
	return nil
}

func (ix *wfIndex) setRec(k int64, r rec) {
	ix.recs[k] = r
	delete(ix.corrupt, k)
	if r.status.Final() {
		delete(ix.active, k)
	} else {
		ix.active[k] = struct{}{}
	}
}

// Commit writes the batch durably (see Batch). It returns the slots whose
// write failed, with the reason; their previous state is back in the
// index. The batch is empty afterwards.
func (b *Batch) Commit() map[slot.ID]error {
	if len(b.items) == 0 {
		return nil
	}
	db := b.db
	items := b.items
	b.items, b.index = nil, make(map[slot.ID]int)

	// 1. Temporary files, not synced one by one.
	for i := range items {
		it := &items[i]
		day, _ := slotPath(it.st.ID.Time)
		dir := filepath.Join(db.dir, "state", it.st.ID.Workflow, day)
		db.mu.Lock()
		err := db.mkdirAll(dir)
		db.mu.Unlock()
		if err != nil {
			it.err = err
			continue
		}
		f, err := os.CreateTemp(dir, tmpPrefix+"*")
		if err != nil {
			it.err = fmt.Errorf("state database: %w", err)
			continue
		}
		it.tmp = f.Name()
		_, err = f.Write(EncodeState(it.st))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			it.err = fmt.Errorf("state database: write %s: %w", it.tmp, err)
		}
	}
	// 2. Their contents durable before any rename.
	if err := db.syncfs(); err != nil {
		for i := range items {
			if items[i].err == nil {
				items[i].err = err
			}
		}
	}
	// 3. Renames, 4. made durable.
	for i := range items {
		it := &items[i]
		if it.err != nil {
			continue
		}
		day, file := slotPath(it.st.ID.Time)
		target := filepath.Join(db.dir, "state", it.st.ID.Workflow, day, file)
		if err := os.Rename(it.tmp, target); err != nil {
			it.err = fmt.Errorf("state database: write %s: %w", target, err)
			continue
		}
		it.written = true
		db.writes.Add(1)
	}
	syncErr := db.syncfs()
	var failed map[slot.ID]error
	db.mu.Lock()
	defer db.mu.Unlock()
	for i := range items {
		it := &items[i]
		if it.err == nil && syncErr == nil {
			day, file := slotPath(it.st.ID.Time)
			delete(db.problems, filepath.ToSlash(filepath.Join("state", it.st.ID.Workflow, day, file)))
			continue
		}
		if failed == nil {
			failed = make(map[slot.ID]error)
		}
		if it.err == nil { // renamed, but the rename may not be durable
			failed[it.st.ID] = syncErr
			continue
		}
		failed[it.st.ID] = it.err
		if it.tmp != "" {
			os.Remove(it.tmp)
		}
		// Take the state back out of the index, unless something wrote the
		// slot since (a later Put owns it then).
		ix := db.wfs[it.st.ID.Workflow]
		if ix == nil {
			continue
		}
		k := key(it.st.ID.Time)
		if cur, ok := ix.recs[k]; !ok || cur != (rec{status: it.st.Status, ext: it.st.ExternalID, retry: it.st.RetryCount}) {
			continue
		}
		if it.had {
			ix.setRec(k, it.old)
		} else {
			delete(ix.recs, k)
			delete(ix.active, k)
		}
	}
	return failed
}

// syncfs flushes the file system that holds the database.
func (db *DB) syncfs() error {
	if db.noSync {
		return nil
	}
	err := unix.Syncfs(int(db.lock.Fd()))
	if err != nil {
		return fmt.Errorf("state database: syncfs %s: %w", db.dir, err)
	}
	return nil
}
