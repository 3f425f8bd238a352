// Package atomicfile replaces files atomically: a reader, or the file
// system after a crash, sees the old content or the new, never a mix.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempPrefix starts the name of the temporary file Write makes beside its
// target; a directory scan can recognise (and remove) a crash's leftovers.
const TempPrefix = ".tmp-"

// Write replaces path with data: a temporary file in the same directory,
// fsync, rename over path, fsync of the directory. With sync false the two
// fsyncs are skipped (still atomic for readers, not durable: for callers
// that sync in bulk, and tests).
func Write(path string, data []byte, perm os.FileMode, sync bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+"*")
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
// its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
