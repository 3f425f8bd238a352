package statedb

// Submit intents, one at a time (batch.go writes and removes many).

import (
	"path/filepath"

	"github.com/celos-go/celos/scheduler/store"

	"github.com/celos-go/celos/scheduler/slot"
)

// PutIntent records that the engine is about to submit the slot.
func (db *DB) PutIntent(id slot.ID, in store.Intent) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	k := key(id.Time)
	day, file := slotPath(keyTime(k))
	in.Time = in.Time.UTC()
	enc := encodeIntent(in)
	if err := db.writeFileAtomic(filepath.Join("intent", id.Workflow, day), file, enc); err != nil {
		if db.fileHolds(filepath.Join(db.dir, "intent", id.Workflow, day, file), enc) { // failed after the rename
			ix.intents[k] = in
		}
		return err
	}
	ix.intents[k] = in
	return nil
}

// GetIntent returns a slot's submit intent, if one was left. An unreadable
// intent file is returned with Attempt -1 and the file's modification time
// (when it was written; zero if even that cannot be read).
func (db *DB) GetIntent(id slot.ID) (store.Intent, bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return store.Intent{}, false, err
	}
	in, ok := ix.intents[key(id.Time)]
	return in, ok, nil
}

// DeleteIntent removes a slot's submit intent, if any.
func (db *DB) DeleteIntent(id slot.ID) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	ix, err := db.index(id.Workflow)
	if err != nil {
		return err
	}
	return removeMarker(db, ix.intents, "intent", id)
}
