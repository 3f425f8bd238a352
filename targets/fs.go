package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
)

// FS is the small file system a target URL names: the local disk, an SFTP
// server or HDFS. Names are absolute slash-separated paths. Missing files
// are reported with errors that satisfy errors.Is(err, fs.ErrNotExist).
type FS interface {
	// String names the file system as a URL without a path
	// ("file://", "sftp://deploy@host:22", "hdfs://nn:8020").
	String() string
	Stat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.FileInfo, error)
	// MkdirAll creates a directory and its parents (mode 0755); an
	// existing directory is no error.
	MkdirAll(name string) error
	Open(name string) (io.ReadCloser, error)
	// WriteNew creates name, which must not exist (the error then
	// satisfies errors.Is(err, fs.ErrExist)), with the size bytes of r,
	// mode 0644. With durable set it returns only once the data is on the
	// server's disk (fsync) where the file system offers that; HDFS files
	// are always durable once written. On failure it removes what it
	// wrote.
	WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error
	// Rename moves from to to, replacing an existing file at to
	// atomically. A directory can only be renamed to a missing path.
	Rename(from, to string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything under it without following
	// symbolic links; a missing name is no error.
	RemoveAll(name string) error
	Close() error
}

// ErrConnectionLost is wrapped by errors of a file system whose connection
// is gone: retrying on it is pointless.
var ErrConnectionLost = errors.New("connection to the server lost")

// ReadFile reads a whole file of at most limit bytes.
// ErrTooLarge: ReadFile found more than its limit.
var ErrTooLarge = errors.New("file larger than the limit")

func ReadFile(fsys FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s%s: %w", fsys, name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s%s is larger than %d bytes%.0w", fsys, name, limit, ErrTooLarge)
	}
	return data, nil
}

// WriteFileAtomic replaces name with data: it writes a temporary file next
// to it (a name not ending in the final name's extension, so a reader of
// *.json never sees it), syncs it and renames it into place.
func WriteFileAtomic(ctx context.Context, fsys FS, name string, data []byte) error {
	tmp := TempName(name, "tmp")
	if err := fsys.WriteNew(ctx, tmp, bytes.NewReader(data), int64(len(data)), true); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	return nil
}

// TempName returns a fresh hidden sibling of name: dir/.base.<kind>-<random>.
func TempName(name, kind string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return path.Join(path.Dir(name), "."+path.Base(name)+"."+kind+"-"+hex.EncodeToString(b[:]))
}

// Exists reports whether name exists; errors other than "not found" are
// returned.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// File is one regular file found by Walk.
type File struct {
	// Path is relative to the walked root, slash-separated.
	Path string
	Size int64
	Info fs.FileInfo
}

// Walk lists the regular files and directories under root (relative,
// sorted, directories first in each directory's listing order), without
// following symbolic links. dirs never includes root itself.
func Walk(fsys FS, root string) (files []File, dirs []string, err error) {
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := fsys.ReadDir(path.Join(root, rel))
		if err != nil {
			return err
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			switch {
			case e.IsDir():
				dirs = append(dirs, p)
				if err := walk(p); err != nil {
					return err
				}
			case e.Mode().IsRegular():
				files = append(files, File{Path: p, Size: e.Size(), Info: e})
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, nil, err
	}
	return files, dirs, nil
}
