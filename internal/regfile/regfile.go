// Package regfile reads files that must be regular files (workflows,
// defaults, target, Hadoop XML and CUE files, tokens and keys) without ever
// blocking on, or reading without bound from, a named pipe, device or
// socket put in their place, also behind a symbolic link: what is not a
// regular file is refused before it is read, and at most a given number of
// bytes is read whatever the file's size claims to be.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Sentinel errors, wrapped with the file's path and what it is.
var (
	// ErrNotRegular: the path is (or a symbolic link leads to) a named
	// pipe, device, socket or directory.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: more bytes could be read than the caller allows.
	ErrTooLarge = errors.New("file too large")
)

// Open opens path for reading if it is a regular file, or a symbolic link
// to one. Anything else is refused with ErrNotRegular before it is opened
// (opening a device can have effects; opening a FIFO blocks), and the
// opened file is checked again (fstat) so that a file swapped in between
// is refused as well: the open itself never blocks (O_NONBLOCK).
func Open(path string) (*os.File, fs.FileInfo, error) { return open(path, true) }

// OpenNoFollow is Open for files that must not be symbolic links either
// (files a program writes itself, such as the state database's): a
// symbolic link is refused with ErrNotRegular (O_NOFOLLOW).
func OpenNoFollow(path string) (*os.File, fs.FileInfo, error) { return open(path, false) }

func open(path string, follow bool) (*os.File, fs.FileInfo, error) {
	if err := check(path, follow); err != nil {
		return nil, nil, err
	}
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if errors.Is(err, syscall.ELOOP) && !follow {
		return nil, nil, fmt.Errorf("%s: %w (symbolic link)", path, ErrNotRegular)
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, Kind(fi.Mode()))
	}
	return f, fi, nil
}

// ReadFile reads the regular file (see Open) at path, refusing it with
// ErrTooLarge if more than limit bytes can be read: the bound is on the bytes
// read, not on the size the file claims (a /proc file claims 0).
func ReadFile(path string, limit int64) ([]byte, error) { return ReadFileInto(nil, path, limit) }

// ReadFileNoFollow is ReadFile refusing symbolic links (see OpenNoFollow).
func ReadFileNoFollow(path string, limit int64) ([]byte, error) {
	return readFile(nil, path, limit, false)
}

// ReadFileInto is ReadFile reading into buf (from its start, growing it
// as needed), for a caller that reads many files and keeps none: it
// returns buf's new contents. It uses plain system calls (no poller).
func ReadFileInto(buf []byte, path string, limit int64) ([]byte, error) {
	return readFile(buf, path, limit, true)
}

func readFile(buf []byte, path string, limit int64, follow bool) ([]byte, error) {
	if err := check(path, follow); err != nil {
		return nil, err
	}
	flags := syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY | syscall.O_CLOEXEC
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, flags, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.ELOOP && !follow {
		return nil, fmt.Errorf("%s: %w (symbolic link)", path, ErrNotRegular)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, KindOfStat(st.Mode))
	}
	// Room for the claimed size and one byte more (to see the end, or
	// that there is more than limit), but never more than limit+1.
	want := min(limit, max(st.Size, 0)) + 1
	if int64(cap(buf)) < want {
		buf = make([]byte, 0, want)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, &fs.PathError{Op: "read", Path: path, Err: &SizeError{Limit: limit}}
			}
			buf = append(buf, 0)[:len(buf)] // grow
		}
		room := buf[len(buf):min(int64(cap(buf)), limit+1)]
		n, err := syscall.Read(fd, room)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &fs.PathError{Op: "read", Path: path, Err: &SizeError{Limit: limit}}
		}
	}
}

// check refuses what is not a regular file (or, when follow, a symbolic
// link to one) before it is opened.
func check(path string, follow bool) error {
	li, err := os.Lstat(path)
	if err != nil {
		// Reported as what the caller does: open (not lstat) X: ...
		return &fs.PathError{Op: "open", Path: path, Err: underlying(err)}
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		if !follow {
			return fmt.Errorf("%s: %w (symbolic link)", path, ErrNotRegular)
		}
		ti, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("%s: symbolic link to something that cannot be read: %w", path, underlying(err))
		}
		if !ti.Mode().IsRegular() {
			return fmt.Errorf("%s: %w (symbolic link to a %s)", path, ErrNotRegular, Kind(ti.Mode()))
		}
		return nil
	}
	if !li.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, Kind(li.Mode()))
	}
	return nil
}

// KindOfStat is Kind for a stat(2) mode (syscall.Stat_t.Mode).
func KindOfStat(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return Kind(fs.ModeDir)
	case syscall.S_IFIFO:
		return Kind(fs.ModeNamedPipe)
	case syscall.S_IFSOCK:
		return Kind(fs.ModeSocket)
	case syscall.S_IFCHR:
		return Kind(fs.ModeDevice | fs.ModeCharDevice)
	case syscall.S_IFBLK:
		return Kind(fs.ModeDevice)
	case syscall.S_IFLNK:
		return Kind(fs.ModeSymlink)
	}
	return Kind(fs.ModeIrregular)
}

// Kind names the type of file of a mode: "named pipe", "character
// device", "socket", ...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file"
}

// underlying strips the *PathError of err (the caller names the path).
func underlying(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Check returns nil when fi describes a regular file, else an error
// wrapping ErrNotRegular that says what it is ("not a regular file (named
// pipe)"), for callers that have a FileInfo already (a directory walk).
func Check(fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrNotRegular, Kind(fi.Mode()))
}

// ReadAll reads r to its end, at most limit bytes; name is used in errors.
// A longer input is an error wrapping ErrTooLarge (a *SizeError).
func ReadAll(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: name, Err: &SizeError{Limit: limit}}
	}
	return data, nil
}

// SizeError says that a file (or, with What, several together) is longer
// than a limit. errors.Is(err, ErrTooLarge) holds for it.
type SizeError struct {
	Limit int64
	What  string // "" for the file itself, else what is larger (e.g. "the project's files together")
}

func (e *SizeError) Error() string {
	if e.What != "" {
		return e.What + " are larger than " + Size(e.Limit)
	}
	return "larger than " + Size(e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) hold.
func (e *SizeError) Is(target error) bool { return target == ErrTooLarge }

// Size formats a byte count for messages: "64 MiB", "1 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
