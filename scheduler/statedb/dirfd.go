package statedb

// Writes relative to directory descriptors.
//
// Every file the database writes, renames or removes, and every directory
// it makes, is named relative to a descriptor of its directory, and that
// descriptor is opened for the operation (or the batch) from the root
// without following a symbolic link in any component: openat2(2) with
// RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH in one call, and, when that fails
// (a missing directory to make, a link to name, a kernel without
// openat2), component by component with O_DIRECTORY|O_NOFOLLOW and
// mkdirat. Nothing is cached from one operation to the next: a directory
// swapped for a link after an earlier write is found at the next one,
// which fails naming it; nothing is written through the link. (os.Root
// is not used: it follows links that stay inside the root, such as one to
// another workflow's directory, and walks every path component on every
// call.)

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler/store"
)

// maxOpenDirs bounds the directory descriptors one dirSet holds open: a
// batch of a fresh fill touches one day directory per 24 hourly slots.
const maxOpenDirs = 1024

// noOpenat2 is set once openat2 is found missing (ENOSYS, or refused by a
// seccomp filter): every directory is then opened component by component.
var noOpenat2 atomic.Bool

// mkMode says what dirSet.open does with a missing directory.
type mkMode int

const (
	mkNone   mkMode = iota // fail (the error wraps fs.ErrNotExist)
	mkSync                 // make it, and fsync its parent
	mkNoSync               // make it without an fsync (a syncfs follows)
)

// dirSet holds the directory descriptors of one operation, each opened
// from the root as the top of this file says. It is used by one goroutine
// and holds no state of the DB: it may be used without db.mu.
type dirSet struct {
	db   *DB
	root int            // -1 until opened
	fds  map[string]int // path relative to the root → descriptor
}

func (db *DB) dirSet() *dirSet { return &dirSet{db: db, root: -1} }

// close closes every descriptor of s.
func (s *dirSet) close() {
	s.closeDirs()
	if s.root >= 0 {
		unix.Close(s.root)
		s.root = -1
	}
}

func (s *dirSet) closeDirs() {
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	clear(s.fds)
}

// open returns a descriptor of the directory rel (relative to the root;
// "" is the root), valid until the next open or close of s. A missing
// directory is made as mk says; a symbolic link or anything but a
// directory in any component below the root is an error naming that
// component, and nothing is made below it.
func (s *dirSet) open(rel string, mk mkMode) (int, error) {
	if s.db.readOnly { // every write goes through a dirSet
		return -1, fmt.Errorf("%w: %s", ErrReadOnly, s.db.dir)
	}
	if s.root < 0 {
		fd, err := openat(unix.AT_FDCWD, s.db.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: s.db.dir, Err: err}
		}
		s.root = fd
	}
	if rel == "" || rel == "." {
		return s.root, nil
	}
	if fd, ok := s.fds[rel]; ok {
		return fd, nil
	}
	if !filepath.IsLocal(rel) { // never: names are checked (validName, validWorkflow)
		return -1, &fs.PathError{Op: "open", Path: filepath.Join(s.db.dir, rel), Err: errors.New("not a path inside the database")}
	}
	if len(s.fds) >= maxOpenDirs {
		s.closeDirs()
	}
	fd, err := openBeneath(s.root, rel)
	if err != nil {
		if fd, err = s.walk(rel, mk); err != nil {
			return -1, err
		}
	}
	if s.fds == nil {
		s.fds = make(map[string]int)
	}
	s.fds[rel] = fd
	return fd, nil
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openBeneath opens the directory rel below root in one system call,
// failing on any symbolic link on the way (its caller then walks the path
// to name it).
func openBeneath(root int, rel string) (int, error) {
	if noOpenat2.Load() {
		return -1, unix.ENOSYS
	}
	how := unix.OpenHow{Flags: dirFlags, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(root, rel, &how)
		switch err {
		case unix.EINTR:
			continue
		case unix.ENOSYS, unix.EPERM:
			noOpenat2.Store(true)
		}
		return fd, err
	}
}

// walk opens rel component by component from the root, making missing
// directories as mk says.
func (s *dirSet) walk(rel string, mk mkMode) (int, error) {
	cur := s.root
	done := ""
	for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		done = filepath.Join(done, part)
		op := "open"
		nfd, err := openat(cur, part, dirFlags)
		if err == unix.ENOENT && mk != mkNone {
			op = "mkdir"
			if err = unix.Mkdirat(cur, part, 0o755); err == nil && mk == mkSync {
				if err = s.db.syncDirFD(cur); err != nil {
					op = "sync parent of"
				}
			}
			if err == nil || err == unix.EEXIST { // made meanwhile: check it
				op = "open"
				nfd, err = openat(cur, part, dirFlags)
			}
		}
		if err != nil {
			err = classify(cur, part, err, errNotDir)
		}
		if cur != s.root {
			unix.Close(cur)
		}
		if err != nil {
			return -1, &fs.PathError{Op: op, Path: filepath.Join(s.db.dir, done), Err: err}
		}
		cur = nfd
	}
	return cur, nil
}

// syncDirFD fsyncs a directory (unless the DB does not sync), counted in
// dirSyncs.
func (db *DB) syncDirFD(fd int) error {
	if db.noSync {
		return nil
	}
	db.dirSyncs.Add(1)
	return fsync(fd)
}

// syncRenamed fsyncs a directory after a rename into it (tests inject
// failures through it).
var syncRenamed = fsync

func fsync(fd int) error {
	for {
		if err := unix.Fsync(fd); err != unix.EINTR {
			return err
		}
	}
}

// writeTempAt writes data to a new temporary file in the directory dirfd
// (created O_CREAT|O_EXCL|O_NOFOLLOW: never an existing file, never
// through a link), mode filePerm, fsynced if sync, and returns its name.
func writeTempAt(dirfd int, data []byte, sync bool) (string, error) {
	var fd int
	var name string
	var err error = unix.EEXIST
	for range 10000 {
		name = tmpPrefix + strconv.FormatUint(rand.Uint64(), 36)
		fd, err = openatMode(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("create a temporary file: %w", err)
	}
	for b := data; len(b) > 0 && err == nil; {
		var n int
		n, err = unix.Write(fd, b)
		switch {
		case err == unix.EINTR:
			err = nil
		case err == nil && n == 0:
			err = io.ErrShortWrite
		}
		b = b[max(n, 0):]
	}
	if err == nil {
		// 0600 at creation, whatever the umask; state files are 0644,
		// readable by operators and Java Celos.
		err = unix.Fchmod(fd, filePerm)
	}
	if err == nil && sync {
		err = fsync(fd)
	}
	if cerr := unix.Close(fd); err == nil && cerr != unix.EINTR {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dirfd, name, 0)
		return "", err
	}
	return name, nil
}

// openatMode is unix.Openat with a mode, retried on EINTR.
func openatMode(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// renameAt renames old to name in the directory dirfd (a link at name is
// replaced, never followed). An empty directory at name (which reads as an
// unreadable record) is replaced too; one that holds something is left as
// it is, and the error wraps store.ErrCorrupt and says to remove it.
func renameAt(dirfd int, old, name string) error {
	err := unix.Renameat(dirfd, old, dirfd, name)
	if err != unix.EISDIR {
		return err
	}
	if rerr := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); rerr != nil && rerr != unix.ENOENT {
		return fmt.Errorf("%w: a directory that is not empty stands in its place: remove it (%v)", store.ErrCorrupt, rerr)
	}
	return unix.Renameat(dirfd, old, dirfd, name)
}

// removeAt removes name from the directory dirfd (an empty directory too,
// as os.Remove does; a link is removed, never followed). A missing name
// gives unix.ENOENT; a directory that is not empty, an error wrapping
// store.ErrCorrupt that says to remove it.
func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		rerr := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		switch rerr {
		case nil, unix.ENOENT:
			return rerr
		case unix.ENOTEMPTY, unix.EEXIST:
			return fmt.Errorf("%w: a directory that is not empty stands in its place: remove it (%v)", store.ErrCorrupt, rerr)
		}
	}
	return err
}

// isNotExist reports whether err says a file or directory is missing.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
