package statedb

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/celos-go/celos/scheduler/store"

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
	corrupt error // the slot's file was corrupt before the batch
	err     error
	written bool
}

// Batch starts a batch.
func (db *DB) Batch() *Batch { return &Batch{db: db, index: make(map[slot.ID]int)} }

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
		b.items = append(b.items, batchItem{st: st, had: had, old: old, corrupt: ix.corrupt[k]})
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

	ws := make([]fileWrite, len(items))
	for i, it := range items {
		day, file := slotPath(it.st.ID.Time)
		ws[i] = fileWrite{dir: filepath.Join("state", it.st.ID.Workflow, day), name: file, data: EncodeState(it.st)}
	}
	syncErr := db.writeMany(ws)
	for i := range items {
		items[i].err, items[i].written = ws[i].err, ws[i].done
	}
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
		if it.corrupt != nil { // the corrupt file is still there
			ix.corrupt[k] = it.corrupt
		}
	}
	return failed
}

// putStatesChunk is the most states PutStates commits in one batch: a
// fresh 7-day fill of 1,000 hourly workflows writes 168,000 slots in one
// step, and a batch holds every file's content and temporary name until
// it commits. Chunks keep that memory bounded (a few MB) whatever the
// number of slots, at two syncfs per chunk.
var putStatesChunk = 16384

// PutStates writes sts in batches of putStatesChunk (see Batch) and
// returns the states that could not be written, with the reason; each of
// them is left as it was. It is the engine's one write per step. Every
// file is atomic and durable as with one batch; a reader may see the
// first chunks before the last are written.
func (db *DB) PutStates(sts []slot.State) map[slot.ID]error {
	var failed map[slot.ID]error
	fail := func(id slot.ID, err error) {
		if failed == nil {
			failed = make(map[slot.ID]error)
		}
		failed[id] = err
	}
	for len(sts) > 0 {
		n := min(len(sts), putStatesChunk)
		b := db.Batch()
		for _, st := range sts[:n] {
			if err := b.Put(st); err != nil {
				fail(st.ID, err)
			}
		}
		for id, err := range b.Commit() {
			fail(id, err)
		}
		sts = sts[n:]
	}
	return failed
}

// fileWrite is one file of writeMany.
type fileWrite struct {
	dir, name string // dir relative to the root
	data      []byte
	err       error // set by writeMany when this file was not written
	done      bool  // renamed into place
}

// writeMany writes files atomically and durably with two file-system
// syncs in all: every file to a temporary file in its directory, one
// syncfs, the renames, a second syncfs. Each write's own failure is in its
// err; the returned error is the second sync's (the renames may then not
// be durable). The files go in the order of their directories, each
// directory opened once per pass (see dirfd.go) while at most
// maxOpenDirs are open.
func (db *DB) writeMany(ws []fileWrite) error {
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(ws[a].dir, ws[b].dir) })
	s := db.dirSet()
	defer s.close()
	tmps := make([]string, len(ws))
	for _, i := range order {
		w := &ws[i]
		// No fsync of a new directory's parent: the syncfs below, after
		// every mkdir and before any rename, makes it durable.
		dirfd, err := s.open(w.dir, mkNoSync)
		if err != nil {
			w.err = fmt.Errorf("state database: %w", err)
			continue
		}
		if tmps[i], err = writeTempAt(dirfd, w.data, false); err != nil {
			w.err = fmt.Errorf("state database: write %s: %w", filepath.Join(db.dir, w.dir, w.name), err)
		}
	}
	// The contents durable before any rename.
	if err := db.syncfs(); err != nil {
		for i := range ws {
			if ws[i].err == nil {
				ws[i].err = err
			}
		}
	}
	for _, i := range order {
		w := &ws[i]
		if tmps[i] == "" {
			continue
		}
		dirfd, err := s.open(w.dir, mkNone)
		if err != nil {
			if w.err == nil {
				w.err = fmt.Errorf("state database: %w", err)
			}
			continue
		}
		if w.err == nil {
			if err := renameAt(dirfd, tmps[i], w.name); err == nil {
				w.done = true
				db.writes.Add(1)
				continue
			} else {
				w.err = fmt.Errorf("state database: write %s: %w", filepath.Join(db.dir, w.dir, w.name), err)
			}
		}
		unix.Unlinkat(dirfd, tmps[i], 0)
	}
	return db.syncfs()
}

// PutIntents records several submit intents durably (see PutIntent), with
// two file-system syncs in all. It returns the slots whose intent could not
// be recorded.
func (db *DB) PutIntents(ins map[slot.ID]store.Intent) map[slot.ID]error {
	failed := make(map[slot.ID]error)
	ids := make([]slot.ID, 0, len(ins))
	ws := make([]fileWrite, 0, len(ins))
	for id, in := range ins {
		db.mu.Lock()
		_, err := db.index(id.Workflow)
		db.mu.Unlock()
		if err != nil {
			failed[id] = err
			continue
		}
		day, file := slotPath(keyTime(key(id.Time)))
		ws = append(ws, fileWrite{dir: filepath.Join("intent", id.Workflow, day), name: file, data: encodeIntent(store.Intent{Attempt: in.Attempt, Time: in.Time.UTC()})})
		ids = append(ids, id)
	}
	syncErr := db.writeMany(ws)
	db.mu.Lock()
	defer db.mu.Unlock()
	for i, id := range ids {
		switch {
		case ws[i].err != nil:
			failed[id] = ws[i].err
		case syncErr != nil:
			failed[id] = syncErr
		}
		// Renamed into place (durably or not): the index follows the
		// disk, so that DeleteIntents removes the file.
		if ws[i].done {
			if ix := db.wfs[id.Workflow]; ix != nil {
				in := ins[id]
				in.Time = in.Time.UTC()
				ix.intents[key(id.Time)] = store.Intent{Attempt: in.Attempt, Time: in.Time} // no pool claim: it is not stored
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// DeleteIntents removes the submit intents of several slots (missing ones
// are no error) with one file-system sync.
func (db *DB) DeleteIntents(ids []slot.ID) error {
	var errs []error
	removed := false
	s := db.dirSet()
	defer s.close()
	db.mu.Lock()
	for _, id := range ids {
		ix, err := db.index(id.Workflow)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		k := key(id.Time)
		if _, ok := ix.intents[k]; !ok {
			continue
		}
		day, file := slotPath(keyTime(k))
		if err := db.removeIn(s, filepath.Join("intent", id.Workflow, day), file, false); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(ix.intents, k)
		removed = true
	}
	db.mu.Unlock()
	if removed {
		if err := db.syncfs(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncFS is unix.Syncfs (tests inject failures through it).
var syncFS = unix.Syncfs

// syncfs flushes the file system that holds the database.
func (db *DB) syncfs() error {
	if db.noSync {
		return nil
	}
	if db.readOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, db.dir)
	}
	err := syncFS(int(db.lock.Fd()))
	if err != nil {
		return fmt.Errorf("state database: syncfs %s: %w", db.dir, err)
	}
	return nil
}
