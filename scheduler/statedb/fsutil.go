package statedb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/celos-go/celos/internal/atomicfile"
	"github.com/celos-go/celos/internal/regfile"
)

// tmpPrefix starts the name of every temporary file; no slot, marker or
// register name can start with a dot, so leftovers of a crash are known.
const tmpPrefix = atomicfile.TempPrefix

// atomicWrite is atomicfile.Write (tests inject failures through it).
var atomicWrite = atomicfile.Write

// filePerm is the mode of the state, intent and register files.
const filePerm = 0o644

// writeFileAtomic replaces dir/name with data (atomicfile.Write: temp
// file, fsync, rename, fsync of the directory), creating dir if needed.
func (db *DB) writeFileAtomic(dir, name string, data []byte) error {
	if err := db.mkdirAll(dir); err != nil {
		return err
	}
	err := atomicWrite(filepath.Join(dir, name), data, filePerm, !db.noSync)
	if errors.Is(err, fs.ErrNotExist) && db.forgetDir(dir) {
		// Removed under the server since mkdirAll remembered it: made again.
		if err := db.mkdirAll(dir); err != nil {
			return err
		}
		err = atomicWrite(filepath.Join(dir, name), data, filePerm, !db.noSync)
	}
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	db.writes.Add(1)
	return nil
}

// forgetDir drops dir and the directories below the root that hold it
// from the cache of directories known to exist, after a write found dir
// missing (an operator removed it while the server ran), so that the next
// mkdirs makes them again rather than every write failing until a
// restart. It reports whether dir was cached (a write worth retrying).
func (db *DB) forgetDir(dir string) bool {
	was := db.dirs[dir]
	for d := dir; d != db.dir && strings.HasPrefix(d, db.dir); d = filepath.Dir(d) {
		delete(db.dirs, d)
	}
	return was
}

// removeFile removes dir/name (a missing file is not an error) and syncs dir.
func (db *DB) removeFile(dir, name string) error {
	if err := db.removeFileNoSync(dir, name); err != nil {
		return err
	}
	if err := db.syncDir(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// The directory is gone (removed under the server): so is the
			// file, and there is nothing to make durable.
			db.forgetDir(dir)
			return nil
		}
		return err
	}
	return nil
}

// removeFileNoSync removes dir/name (a missing file is not an error)
// without syncing dir: for callers that sync each directory once after
// many removals.
func (db *DB) removeFileNoSync(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	db.writes.Add(1)
	return nil
}

// maxCachedDirs bounds the cache of directories known to exist.
const maxCachedDirs = 1 << 16

// mkdirAll creates dir (inside the database root) and syncs the parent of
// every directory it creates, so a new day directory survives a crash.
// Every component below the root must be a real directory: a symbolic
// link (or anything else) in the way is refused, never written through.
func (db *DB) mkdirAll(dir string) error { return db.mkdirs(dir, true) }

// mkdirs is mkdirAll; with syncParents false it does not sync the parents
// of the directories it creates: for writeMany, whose syncfs after every
// mkdir and before any rename makes them durable (one journal commit
// instead of one per directory).
func (db *DB) mkdirs(dir string, syncParents bool) error {
	if db.dirs[dir] {
		return nil
	}
	if len(db.dirs) >= maxCachedDirs {
		// Only a cache (one stat per component saved per write): forget
		// it rather than grow with every day of every workflow of a
		// long-running server.
		clear(db.dirs)
	}
	rel, err := filepath.Rel(db.dir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("state database: %s is outside %s", dir, db.dir)
	}
	cur := db.dir
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			err = os.Mkdir(next, 0o755)
			switch {
			case err == nil:
				if !syncParents {
					cur = next
					continue
				}
				if err := db.syncDir(cur); err != nil {
					return fmt.Errorf("state database: sync %s: %w", cur, err)
				}
				cur = next
				continue
			case errors.Is(err, fs.ErrExist): // made meanwhile: check it
				fi, err = os.Lstat(next)
			}
		}
		if err != nil {
			return fmt.Errorf("state database: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("state database: %s: %w", next, errSymlink)
		}
		if !fi.IsDir() {
			return fmt.Errorf("state database: %s: %w (%s)", next, errNotDir, regfile.Kind(fi.Mode()))
		}
		cur = next
	}
	db.dirs[dir] = true
	return nil
}

func (db *DB) syncDir(dir string) error {
	if db.noSync {
		return nil
	}
	db.dirSyncs.Add(1)
	return atomicfile.SyncDir(dir)
}

// validName checks a workflow id, register bucket or register key before it
// becomes a path component: not empty, at most 255 bytes, no '/', '\\',
// '.', NUL or other control characters (Celos forbids '/' and '.' in
// register names; workflow ids are narrower still, schema.IDPattern, but a
// dot-free rule here also keeps "." and ".." and hidden names out).
func validName(kind, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", kind)
	}
	if len(s) > 255 {
		return fmt.Errorf("%s %.40q... is longer than 255 bytes", kind, s)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || r == '.' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s %q may not contain '/', '\\', '.' or control characters", kind, s)
		}
	}
	return nil
}

// validWorkflow checks a workflow id: like validName, but '.' is allowed
// inside (schema ids may hold dots) as long as the id is not "." or "..".
func validWorkflow(id string) error {
	if id == "" || id == "." || id == ".." || strings.HasPrefix(id, ".") {
		return fmt.Errorf("workflow id %q is empty or starts with a dot", id)
	}
	if len(id) > 255 {
		return fmt.Errorf("workflow id %.40q... is longer than 255 bytes", id)
	}
	for _, r := range id {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("workflow id %q may not contain '/', '\\' or control characters", id)
		}
	}
	return nil
}
