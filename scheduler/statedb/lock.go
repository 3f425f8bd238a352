package statedb

// The lock against a second process, and Close, which releases it.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/celos-go/celos/internal/regfile"
)

// ErrBadLock: the lock file is a symbolic link, FIFO, device or anything
// but a regular file; it is neither followed, opened for I/O nor changed.
var ErrBadLock = errors.New("lock file is not a regular file")

// openLock opens (creating it) the lock file at path for writing without
// following a symbolic link (O_NOFOLLOW), without blocking on a FIFO
// (O_NONBLOCK) and without truncating it: a symlink or anything but a
// regular file is refused with ErrBadLock, naming it.
func openLock(path string) (*os.File, error) {
	// A FIFO or device is refused before it is opened at all; the open
	// and fstat below catch one swapped in between.
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, badLock(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return nil, badLock(path, fi.Mode())
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = badLock(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func badLock(path string, mode fs.FileMode) error {
	if mode&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symbolic link (not followed; remove it)", ErrBadLock, path)
	}
	return fmt.Errorf("%w: %s is a %s (remove it)", ErrBadLock, path, regfile.Kind(mode))
}

// Close releases the lock. The DB must not be used afterwards.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	db.stop.Store(true) // a background load reads no further workflow
	if db.lock == nil { // read-only, no lock file
		return nil
	}
	return db.lock.Close()
}
