// Package regfile reads files that must be regular files: a named pipe, a
// device or a socket, also behind a symbolic link, is refused before it is
// read and without blocking, and at most a given number of bytes is read
// whatever the file's size claims to be.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a file that is not a regular
// file (the message says what it is).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file longer than the limit
// (a *SizeError).
var ErrTooLarge = errors.New("file too large")

// SizeError says that a file is longer than a limit.
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

// KindError says what a file is instead of a regular file.
type KindError struct {
	Kind string // "named pipe (FIFO)", "character device", ...
}

func (e *KindError) Error() string { return "is a " + e.Kind + ", not a regular file" }

// Is makes errors.Is(err, ErrNotRegular) hold.
func (e *KindError) Is(target error) bool { return target == ErrNotRegular }

// Kind names the type of a file mode: "regular file", "directory",
// "named pipe (FIFO)", "character device", "device", "socket", "symbolic
// link" or "irregular file".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "irregular file"
	}
}

// Check returns nil when fi describes a regular file, else a *KindError.
func Check(fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return &KindError{Kind: Kind(fi.Mode())}
}

// Open opens path (following symbolic links) for reading if it is a
// regular file. Anything else is refused with an *fs.PathError wrapping a
// *KindError: a FIFO or a device is never opened in blocking mode, and
// only opened at all when it replaced a regular file between the checks
// (then it is closed again at once).
func Open(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := Check(fi); err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	// O_NONBLOCK: if a FIFO took the file's place after the Stat, the
	// open does not wait for a writer. It has no effect on a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err = f.Stat()
	if err == nil {
		err = Check(fi)
		if err != nil {
			err = &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the regular file path, at most limit bytes: a longer file
// is an error wrapping ErrTooLarge (the bytes read count, not the size the
// file system reports).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, path, limit)
}

// ReadAll reads r to its end, at most limit bytes; name is used in errors.
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
