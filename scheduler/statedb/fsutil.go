package statedb

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/internal/atomicfile"
	"github.com/celos-go/celos/scheduler/store"
)

// tmpPrefix starts the name of every temporary file; no slot, marker or
// register name can start with a dot, so leftovers of a crash are known.
const tmpPrefix = atomicfile.TempPrefix

// filePerm is the mode of the state, intent and register files.
const filePerm = 0o644

// writeFileAtomic replaces dir/name (dir relative to the root) with data:
// a temporary file, fsync, rename, fsync of the directory, all relative
// to a descriptor of dir opened without following links (see dirfd.go),
// dir made if needed (its parents fsynced).
func (db *DB) writeFileAtomic(dir, name string, data []byte) error {
	s := db.dirSet()
	defer s.close()
	dirfd, err := s.open(dir, mkSync)
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	path := filepath.Join(db.dir, dir, name)
	tmp, err := writeTempAt(dirfd, data, !db.noSync)
	if err == nil {
		if err = renameAt(dirfd, tmp, name); err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("state database: write %s: %w", path, err)
	}
	if !db.noSync {
		if err := syncRenamed(dirfd); err != nil {
			return fmt.Errorf("state database: sync %s: %w", filepath.Join(db.dir, dir), err)
		}
	}
	db.writes.Add(1)
	return nil
}

// removeFile removes dir/name (dir relative to the root; a missing file
// or directory is not an error) and syncs dir.
func (db *DB) removeFile(dir, name string) error {
	s := db.dirSet()
	defer s.close()
	return db.removeIn(s, dir, name, true)
}

// removeIn removes dir/name through s (a missing file or directory is not
// an error); with sync it fsyncs dir afterwards, otherwise the caller
// syncs (one directory fsync or syncfs after many removals).
func (db *DB) removeIn(s *dirSet, dir, name string, sync bool) error {
	dirfd, err := s.open(dir, mkNone)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	if err := removeAt(dirfd, name); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return fmt.Errorf("state database: remove %s: %w", filepath.Join(db.dir, dir, name), err)
	}
	db.writes.Add(1)
	if sync {
		if err := db.syncDirFD(dirfd); err != nil {
			return fmt.Errorf("state database: sync %s: %w", filepath.Join(db.dir, dir), err)
		}
	}
	return nil
}

// validName checks a register bucket or key before it becomes a path
// component, by the rules every store applies (store.CheckName: not empty,
// at most 255 bytes, valid UTF-8, no '/', '\\', '.', NUL or other control
// characters; Celos forbids '/' and '.' in register names, and a dot-free
// rule also keeps "." and ".." and hidden names out). The error wraps
// store.ErrBadName.
func validName(kind, s string) error { return store.CheckName(kind, s) }

// validWorkflow checks a workflow id before it becomes a path component,
// by the rules every store applies (store.CheckWorkflow: like validName,
// but '.' is allowed inside, schema ids may hold dots, as long as the id
// does not start with one). The error wraps store.ErrBadName.
func validWorkflow(id string) error { return store.CheckWorkflow(id) }

// writeRecords writes the JSON of each workflow's value of set as the
// file dir/<workflow> (dir is owner or run; what names the record in
// errors), all together (writeMany: written and synced, then renamed into
// place and synced again), and clears the problem of each file written.
// A workflow whose file could not be written is added to failed.
func writeRecords[T any](db *DB, dir, what string, set map[string]T, failed map[string]error) {
	wfs := make([]string, 0, len(set))
	ws := make([]fileWrite, 0, len(set))
	for wf, v := range set {
		if err := validWorkflow(wf); err != nil {
			failed[wf] = err
			continue
		}
		data, err := json.Marshal(v)
		if err != nil {
			failed[wf] = fmt.Errorf("state database: %s of %s: %w", what, wf, err)
			continue
		}
		wfs = append(wfs, wf)
		ws = append(ws, fileWrite{dir: dir, name: wf, data: append(data, '\n')})
	}
	var syncErr error
	if len(ws) > 0 {
		syncErr = db.writeMany(ws)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for i, wf := range wfs {
		switch {
		case ws[i].err != nil:
			failed[wf] = fmt.Errorf("record %s of %s: %w", what, wf, ws[i].err)
		case syncErr != nil:
			failed[wf] = fmt.Errorf("record %s of %s: %w", what, wf, syncErr)
		default:
			delete(db.problems, filepath.Join(dir, wf))
		}
	}
}
