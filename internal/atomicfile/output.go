package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/celos-go/celos/internal/regfile"
)

// fifoReaderWait is how long WriteOutput waits for a process to open a
// FIFO for reading (a var for tests).
var fifoReaderWait = 30 * time.Second

// WriteOutput writes data to path, a file a user named for a command's
// output (celos export -o, celos server --url-file), as a shell's `>`
// would, but atomically where it can:
//   - a missing path or a regular file is replaced atomically (Write,
//     synced);
//   - a symbolic link is followed: the file it leads to is replaced
//     atomically and the link kept (a link to nothing is refused, naming
//     where it points); a link the kernel resolves but a path walk cannot
//     (/dev/stdout to /proc/self/fd/1 to a file) is written through;
//   - a FIFO or a character device (/dev/null, a terminal, the pipe behind
//     /dev/stdout) is opened for writing and written, never replaced: a
//     rename over it replaced a root user's /dev/null with a regular
//     file. A FIFO that no process opens for reading within 30 s is an
//     error, not a wait for ever;
//   - a directory, socket or block device is refused, naming it.
func WriteOutput(path string, data []byte, perm os.FileMode) error {
	fi, err := os.Stat(path) // (through links)
	if errors.Is(err, fs.ErrNotExist) {
		if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			dest, _ := os.Readlink(path)
			return fmt.Errorf("write %s: a symbolic link to %s, which does not exist", path, dest)
		}
		return Write(path, data, perm, true)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return writeThrough(path, data, os.O_TRUNC)
		}
		return Write(target, data, perm, true)
	case m&fs.ModeNamedPipe != 0, m&fs.ModeCharDevice != 0:
		return writeThrough(path, data, 0)
	case m.IsDir():
		return fmt.Errorf("write %s: is a directory", path)
	default:
		return fmt.Errorf("write %s: is a %s: not written", path, regfile.Kind(m))
	}
}

// writeThrough opens path for writing, without creating it or becoming
// its controlling terminal, and writes data. A FIFO is opened without
// blocking, again until a reader has it open or fifoReaderWait passed.
func writeThrough(path string, data []byte, flag int) error {
	deadline := time.Now().Add(fifoReaderWait)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|flag|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.ENXIO) { // a FIFO nobody reads yet
			if time.Now().After(deadline) {
				return fmt.Errorf("write %s: a FIFO that no process opened for reading in %v", path, fifoReaderWait)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
}
