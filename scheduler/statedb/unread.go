package statedb

// Unread: which workflows a background load has still to read (the UI
// leaves them out of its counts instead of waiting for them).

// Unread returns those of wfs whose state is not in memory while a
// background load (LoadInBackground) runs: the workflows it has still to
// read. It returns nil when no background load runs (a workflow not read
// yet is then read on first use, as always). It reads no file.
func (db *DB) Unread(wfs []string) map[string]bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.bg == nil || db.closed {
		return nil
	}
	out := make(map[string]bool)
	for _, wf := range wfs {
		if db.wfs[wf] == nil {
			out[wf] = true
		}
	}
	return out
}

// Loading says whether a background load (LoadInBackground) runs.
func (db *DB) Loading() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.bg != nil && !db.closed
}
