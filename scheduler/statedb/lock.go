package statedb

// The lock against a second process, and Close, which releases it.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// deadHolderWait is how long flock waits for a lock held although the
// process the lock file names is gone (a var for tests).
var deadHolderWait = 10 * time.Second

// flock takes the lock on f (how: LOCK_EX or LOCK_SH) without blocking.
// When another process holds it and the process the lock file names has
// exited, the holder can only be a process that one forked and that has
// not exec'd yet: the lock file is opened O_CLOEXEC, so exec drops it, but
// a fork copies it. A server killed while starting a command job's
// supervisor leaves such a holder for a moment, and a restart at once
// would fail. flock waits for it, up to deadHolderWait, as long as the
// process the file names (read again each time) is not alive.
func flock(f *os.File, how int) error {
	deadline := time.Now().Add(deadHolderWait)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		pid := lockPID(f)
		if pid <= 0 || alive(pid) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// DeadHolder reports the process that the lock file of the state
// directory dir names (read without creating or locking anything, no link
// followed) when that process is gone: the last server on dir died
// without closing it (kill -9, a crash). 0 when the file names no process
// or a live one. A server starting again on dir at once may find what the
// dead one held still held, for a moment, by a process it had just forked
// (see flock): its port, for one.
func DeadHolder(dir string) int {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	if pid := lockPID(f); pid > 0 && !alive(pid) {
		return pid
	}
	return 0
}

// lockPID is the process the lock file f names (0: none).
func lockPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// alive reports whether process pid exists and is not a zombie (which
// holds no file).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
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
