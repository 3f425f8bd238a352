// Package compare holds the output comparers of `celos test`: a file tree
// read into memory (from the local disk or any targets.FS), and three ways
// of comparing an expected tree with an actual one: plain (recursive, with
// a unified diff for text files), line-delimited JSON as a multiset of
// records with ignored fields, and TSV tables with or without row and
// column order. A comparison returns the differences as text a person
// reads in the test's failure report; none means equal.
package compare

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/celos-go/celos/internal/regfile"
	"github.com/celos-go/celos/targets"
)

// Limits on what a tree may hold, so that a runaway output fails the test
// instead of the machine.
const (
	MaxFileSize  = 64 << 20
	MaxTreeSize  = 256 << 20
	MaxTreeFiles = 100000
)

// ErrTooBig is wrapped by the errors of a tree past the limits.
var ErrTooBig = errors.New("too big to compare")

// Entry is one file or directory of a tree.
type Entry struct {
	Dir  bool
	Data []byte
}

// Tree is a file tree in memory: slash-separated paths relative to its
// root → entries. A tree whose root is a file has the single path ".".
type Tree map[string]Entry

// Files returns a tree of inline files (name → content) under a directory
// root, with the directories their names imply.
func Files(files map[string]string) Tree {
	t := Tree{}
	for name, data := range files {
		t[name] = Entry{Data: []byte(data)}
		for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
			t[d] = Entry{Dir: true}
		}
	}
	return t
}

// Paths returns the tree's paths, sorted.
func (t Tree) Paths() []string {
	ps := make([]string, 0, len(t))
	for p := range t {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// ReadLocal reads the directory or file root of the local disk. Symbolic
// links are not followed (a link is an error: fixtures are plain trees).
func ReadLocal(root string) (Tree, error) {
	return ReadFS(targets.Local{}, filepath.ToSlash(root))
}

// ReadFS reads the directory or file root of fsys into a tree, within
// the limits above. A missing root is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadFS(fsys targets.FS, root string) (Tree, error) {
	fi, err := fsys.Stat(root)
	if err != nil {
		return nil, err
	}
	t := Tree{}
	var total int64
	read := func(rel string, size int64) error {
		if size > MaxFileSize {
			return fmt.Errorf("%s: %w (%d bytes; at most %d)", rel, ErrTooBig, size, MaxFileSize)
		}
		if total += size; total > MaxTreeSize {
			return fmt.Errorf("%s: %w (more than %d bytes in all)", root, ErrTooBig, MaxTreeSize)
		}
		data, err := targets.ReadFile(fsys, path.Join(root, rel), MaxFileSize)
		if err != nil {
			return err
		}
		t[rel] = Entry{Data: data}
		return nil
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is neither a regular file nor a directory (a %s)", root, regfile.Kind(fi.Mode().Type()))
		}
		if err := read(".", fi.Size()); err != nil {
			return nil, err
		}
		return t, nil
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := fsys.ReadDir(path.Join(root, rel))
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			if len(t) >= MaxTreeFiles {
				return fmt.Errorf("%s: %w (more than %d files)", root, ErrTooBig, MaxTreeFiles)
			}
			switch {
			case e.IsDir():
				t[p] = Entry{Dir: true}
				if err := walk(p); err != nil {
					return err
				}
			case e.Mode().IsRegular():
				if err := read(p, e.Size()); err != nil {
					return err
				}
			default:
				return fmt.Errorf("%s: neither a regular file nor a directory (a %s)", path.Join(root, p), regfile.Kind(e.Mode().Type()))
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	return t, nil
}

// IsNotExist reports whether err says a tree's root is missing.
func IsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, os.ErrNotExist)
}

// hidden reports whether a file is one Hadoop tools skip (_SUCCESS,
// .part-00000.crc): the record comparers leave such files out.
func hidden(p string) bool {
	base := path.Base(p)
	return strings.HasPrefix(base, "_") || strings.HasPrefix(base, ".")
}
