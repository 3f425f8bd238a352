package statedb

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/scheduler/store"
)

// Workflow owners (store.Owner, celos only) are files:
//
//	<dir>/owner/<workflow>   {"project":"wordcount","file":"wordcount.json"}

// maxOwnerFile bounds an owner record.
const maxOwnerFile = 4 << 10

// Owners reads every owner record. A record that cannot be read or
// parsed is left out and reported in Problems (its id is then unowned, and
// the next owner overwrites it); only an unreadable owner directory is an
// error.
func (db *DB) Owners() (map[string]store.Owner, error) {
	dir := filepath.Join(db.dir, "owner")
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, errClosed
	}
	entries, err := db.readDir("owner") // owner/ itself is not followed either
	out := make(map[string]store.Owner, len(entries))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: read owner records: %w", err)
	}
	for _, e := range entries {
		wf := e.Name()
		if validWorkflow(wf) != nil {
			continue // temporary files, strangers
		}
		rel := filepath.Join("owner", wf)
		data, err := regfile.ReadFileNoFollow(filepath.Join(dir, wf), maxOwnerFile)
		if err != nil {
			db.problems[rel] = trimPath(err, filepath.Join(dir, wf))
			continue
		}
		db.reads.Add(1)
		var o store.Owner
		if err := json.Unmarshal(data, &o); err != nil || o.Project == "" || o.File == "" {
			db.problems[rel] = "not an owner record (want {\"project\":...,\"file\":...})"
			continue
		}
		delete(db.problems, rel)
		out[wf] = o
	}
	return out, nil
}

// SetOwner records o as the owner of workflow wf.
func (db *DB) SetOwner(wf string, o store.Owner) error {
	if err := validWorkflow(wf); err != nil {
		return err
	}
	data, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("state database: owner of %s: %w", wf, err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	if err := db.writeFileAtomic("owner", wf, append(data, '\n')); err != nil {
		return fmt.Errorf("record owner of %s: %w", wf, err)
	}
	delete(db.problems, filepath.Join("owner", wf))
	return nil
}

// DeleteOwner removes the owner record of workflow wf (a missing one is
// not an error).
func (db *DB) DeleteOwner(wf string) error {
	if err := validWorkflow(wf); err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	if err := db.removeFile("owner", wf); err != nil {
		return fmt.Errorf("remove owner record of %s: %w", wf, err)
	}
	delete(db.problems, filepath.Join("owner", wf))
	return nil
}

// WriteOwners records the owners in set and removes the records of the
// workflows in remove (a missing one is not an error; one also in set is
// kept), all together: every record is written to a temporary file, one
// syncfs makes them durable, they are renamed into place and a second
// syncfs makes the renames durable; the removals then cost one more. A
// crash at any point leaves each record whole, old or new (a rename
// replaces a file at once), never torn. It returns the workflows whose
// record could not be written or removed, with the reason.
func (db *DB) WriteOwners(set map[string]store.Owner, remove []string) map[string]error {
	failed := make(map[string]error)
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		for wf := range set {
			failed[wf] = errClosed
		}
		for _, wf := range remove {
			failed[wf] = errClosed
		}
		return failed
	}
	const dir = "owner"
	writeRecords(db, dir, "owner", set, failed)
	var removed []string
	s := db.dirSet()
	defer s.close()
	for _, wf := range remove {
		if _, ok := set[wf]; ok {
			continue
		}
		if err := validWorkflow(wf); err != nil {
			failed[wf] = err
			continue
		}
		if err := db.removeIn(s, dir, wf, false); err != nil {
			failed[wf] = fmt.Errorf("remove owner record of %s: %w", wf, err)
			continue
		}
		removed = append(removed, wf)
	}
	if len(removed) > 0 {
		err := db.syncfs()
		db.mu.Lock()
		for _, wf := range removed {
			if err != nil {
				failed[wf] = fmt.Errorf("remove owner record of %s: %w", wf, err)
			} else {
				delete(db.problems, filepath.Join("owner", wf))
			}
		}
		db.mu.Unlock()
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// trimPath is err's message without the leading "path: ".
func trimPath(err error, path string) string {
	msg := err.Error()
	if len(msg) > len(path)+2 && msg[:len(path)+2] == path+": " {
		return msg[len(path)+2:]
	}
	return msg
}
