package statedb

// Paused flags: an empty file paused/<workflow>.

import (
	"errors"
	"fmt"
	"io/fs"
)

func (db *DB) loadPaused() error {
	entries, err := db.readDir("paused")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	for _, e := range entries {
		if validWorkflow(e.Name()) == nil && !e.IsDir() {
			db.paused[e.Name()] = true
		}
	}
	return nil
}

// Paused reports whether workflow wf is paused.
func (db *DB) Paused(wf string) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.paused[wf]
}

// SetPaused pauses (an empty file paused/<wf>) or unpauses a workflow.
func (db *DB) SetPaused(wf string, paused bool) error {
	if err := validWorkflow(wf); err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	if db.paused[wf] == paused {
		return nil
	}
	const dir = "paused"
	var err error
	if paused {
		err = db.writeFileAtomic(dir, wf, nil)
	} else {
		err = db.removeFile(dir, wf)
	}
	if err != nil {
		return err
	}
	if paused {
		db.paused[wf] = true
	} else {
		delete(db.paused, wf)
	}
	return nil
}
