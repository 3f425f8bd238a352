package statedb

// Opening a state directory that cannot be written (Options.ReadOnly):
// celos db migrate from a snapshot mounted read-only.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrReadOnly: a write to a database opened with Options.ReadOnly.
var ErrReadOnly = errors.New("state database is open read-only")

// openReadOnly opens the existing directory abs without creating or
// writing anything. Its lock file, if there is one, is opened read-only
// and held with a shared flock for as long as the DB is open: a process
// holding it (a server, whose flock is exclusive) makes the open fail
// with ErrLocked as Open does, and a server started meanwhile fails to
// lock it. Without a lock file no process holds the directory (a server
// makes it before anything else).
func openReadOnly(abs string, opts Options) (*DB, error) {
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("state database %s: not a directory", abs)
	}
	lockPath := filepath.Join(abs, ".lock")
	f, err := openLockReadOnly(lockPath)
	if err != nil {
		return nil, fmt.Errorf("state database %s: cannot check that no process holds it: %w", abs, err)
	}
	if f != nil {
		if err := flock(f, syscall.LOCK_SH); err != nil {
			err = lockError(f, abs, lockPath, err)
			f.Close()
			return nil, err
		}
	}
	return newDB(abs, opts, f, true)
}

// openLockReadOnly opens the lock file at path for reading, as openLock
// does (no link followed, no FIFO or device); nil if there is none.
func openLockReadOnly(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, badLock(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = badLock(path, fi.Mode())
		}
		return nil, err
	}
	return f, nil
}

// lockError is the error of a flock of the lock file f that failed with
// err: ErrLocked naming the holder's PID (the lock file's content) if a
// process holds it.
func lockError(f *os.File, abs, lockPath string, err error) error {
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("state database %s: lock %s: %w", abs, lockPath, err)
	}
	holder := "another process"
	switch pid := lockPID(f); {
	case pid > 0 && alive(pid):
		holder = fmt.Sprintf("process %d", pid)
	case pid > 0:
		holder = fmt.Sprintf("a process that process %d (which has exited) started and that still has the lock file open: find it with `fuser %s`", pid, lockPath)
	}
	return fmt.Errorf("%w: %s is in use by %s (lock file %s)", ErrLocked, abs, holder, lockPath)
}

// ReadOnly reports whether the DB was opened with Options.ReadOnly, and
// whether it holds the directory's lock file (shared) or there is none.
func (db *DB) ReadOnly() (readOnly, locked bool) { return db.readOnly, db.lock != nil }
