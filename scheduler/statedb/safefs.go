package statedb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
	"golang.org/x/sys/unix"
)

// Every file and directory the database reads is opened without following
// a symbolic link and without blocking on a FIFO or device: directories
// component by component from the root with O_DIRECTORY|O_NOFOLLOW, files
// with O_NOFOLLOW|O_NONBLOCK and then checked (fstat) to be regular files
// before a bounded read. Whatever else is found is an unreadable record,
// reported like a corrupt one.

// Errors of the checks; the file's path is in the record's problem.
var (
	// errSymlink: a symbolic link where a file or directory was expected.
	errSymlink = errors.New("a symbolic link (not followed)")
	// errNotRegular: a FIFO, device, socket or directory where a file was
	// expected; wrapped with the kind.
	errNotRegular = errors.New("not a regular file")
	// errNotDir: something other than a directory where one was expected.
	errNotDir = errors.New("not a directory")
)

// openDir opens the directory rel (relative to the database root, "" for
// the root) without following a symbolic link in any of its components.
// A missing directory gives an error wrapping fs.ErrNotExist.
func (db *DB) openDir(rel string) (*os.File, error) {
	fd, err := unix.Open(db.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: db.dir, Err: err}
	}
	cur := db.dir
	if rel != "" && rel != "." {
		for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
			next := filepath.Join(cur, part)
			nfd, err := openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
			if err != nil {
				err = classify(fd, part, err, errNotDir)
			}
			unix.Close(fd)
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: next, Err: err}
			}
			fd, cur = nfd, next
		}
	}
	return os.NewFile(uintptr(fd), cur), nil
}

// openat is unix.Openat, retried on EINTR.
func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// classify turns the error of an O_NOFOLLOW open of dirfd/name into
// errSymlink when name is a symbolic link (ELOOP, or ENOTDIR with
// O_DIRECTORY), else wrong when it exists with another type, else err.
func classify(dirfd int, name string, err, wrong error) error {
	if err == unix.ELOOP || err == unix.ENOTDIR {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return errSymlink
			}
			return fmt.Errorf("%w (%s)", wrong, regfile.KindOfStat(st.Mode))
		}
	}
	return err
}

// readDir lists the directory rel (see openDir), sorted by name as
// os.ReadDir does.
func (db *DB) readDir(rel string) ([]os.DirEntry, error) {
	d, err := db.openDir(rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// readRegularAt reads the regular file name in the directory dirfd, at
// most maxStateFile bytes, with plain system calls (os.Open would also
// register the file with the poller: start-up reads 100,000s). A symbolic
// link is not followed (errSymlink); a FIFO, device or socket is not read
// (errNotRegular): the open does not block (O_NONBLOCK) and fstat decides.
// path names the file in errors.
func readRegularAt(dirfd int, name, path string) ([]byte, error) {
	return readRegularAtMax(dirfd, name, path, maxStateFile)
}

// readRegularAtMax is readRegularAt with a bound of limit bytes.
func readRegularAtMax(dirfd int, name, path string, limit int64) ([]byte, error) {
	fd, err := openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY)
	if err != nil {
		if err = classify(dirfd, name, err, errNotRegular); errors.Is(err, errSymlink) {
			return nil, err
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%w (%s)", errNotRegular, regfile.KindOfStat(st.Mode))
	}
	if st.Size > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	buf := make([]byte, max(512, st.Size+1))
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
		if n == len(buf) {
			if int64(len(buf)) > limit {
				return nil, fmt.Errorf("larger than %d bytes", limit)
			}
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
}

// readFile reads the regular file rel (relative to the root) as
// readRegularAt does, its directories opened as openDir does.
func (db *DB) readFile(rel string) ([]byte, error) {
	return db.readFileMax(rel, maxStateFile)
}

// readFileMax is readFile with a bound of limit bytes.
func (db *DB) readFileMax(rel string, limit int64) ([]byte, error) {
	d, err := db.openDir(filepath.Dir(rel))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return readRegularAtMax(int(d.Fd()), filepath.Base(rel), filepath.Join(db.dir, rel), limit)
}
