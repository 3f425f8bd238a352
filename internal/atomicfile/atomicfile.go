// Package atomicfile replaces files atomically: a reader, or the file
// system after a crash, sees the old content or the new, never a mix.
// Nothing it creates follows a symbolic link: the temporary file is
// created exclusively (O_EXCL|O_NOFOLLOW) and renamed over the target, so
// a link at the target is replaced, never written through.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// TempPrefix starts the name of the temporary file Write makes beside its
// target; a directory scan can recognise (and remove) a crash's leftovers.
const TempPrefix = ".tmp-"

// CreateTemp creates a new file TempPrefix+<random> in dir, mode 0600,
// open for writing. It never opens an existing file nor follows a
// symbolic link (O_CREAT|O_EXCL|O_NOFOLLOW): a name that exists is
// skipped for another.
func CreateTemp(dir string) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, TempPrefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, TempPrefix+"*"), Err: fs.ErrExist}
}

// Write replaces path with data: a temporary file in the same directory,
// fsync, rename over path, fsync of the directory. With sync false the two
// fsyncs are skipped (still atomic for readers, not durable: for callers
// that sync in bulk, and tests). A symbolic link at path is replaced by
// the file, not followed.
func Write(path string, data []byte, perm os.FileMode, sync bool) error {
	dir := filepath.Dir(path)
	f, err := CreateTemp(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if sync {
		if err := SyncDir(dir); err != nil {
			return fmt.Errorf("sync %s: %w", dir, err)
		}
	}
	return nil
}

// SyncDir fsyncs a directory, making the creation, renaming and removal of
// its entries durable. dir must be a directory (O_DIRECTORY: a FIFO or
// device in its place is refused at once, never opened).
func SyncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
