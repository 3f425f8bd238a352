package trigger

// The dataVolume trigger and the directory listings it reads.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/schema/workflow"
)

// Entry is one entry of a listed directory.
type Entry struct {
	Name string
	Size int64
	Dir  bool
}

// Lister is what a FileSystems offers for dataVolume triggers: the entries
// of directory dir on the file system fsURI (as for Exists; "" is the
// installation default). A directory that does not exist (or a path below
// a regular file) lists as empty, without error. Implementations are safe
// for concurrent use.
type Lister interface {
	List(ctx context.Context, fsURI, dir string) ([]Entry, error)
}

// List lists dir on the local file system (fs URIs as for Exists).
func (Local) List(ctx context.Context, fsURI, dir string) ([]Entry, error) {
	if err := localURI(fsURI); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("empty path")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// (os.ReadDir opens with O_DIRECTORY: a FIFO in the directory's place
	// is ENOTDIR at once, never opened for reading.)
	des, err := os.ReadDir(filepath.FromSlash(dir))
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, nil
	case err != nil:
		return nil, err
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		if e, ok := localEntry(dir, de); ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// localEntry is the entry of de in dir as Hadoop's local file system sees
// it: a symbolic link is followed (its target's size and kind; a link to
// nothing is left out), and of what is not a directory only regular files
// are listed (a FIFO, socket or device holds no data to count). Nothing is
// opened.
func localEntry(dir string, de fs.DirEntry) (Entry, bool) {
	var fi fs.FileInfo
	var err error
	if de.Type()&fs.ModeSymlink != 0 {
		fi, err = os.Stat(filepath.Join(filepath.FromSlash(dir), de.Name()))
	} else {
		fi, err = de.Info()
	}
	switch {
	case err != nil: // gone since the listing, a dangling link
		return Entry{}, false
	case fi.IsDir():
		return Entry{Name: de.Name(), Dir: true}, true
	case !fi.Mode().IsRegular():
		return Entry{}, false
	}
	return Entry{Name: de.Name(), Size: fi.Size()}, true
}

// entries converts a listing of targets.
func entries(infos []fs.FileInfo) []Entry {
	out := make([]Entry, len(infos))
	for i, fi := range infos {
		out[i] = Entry{Name: fi.Name(), Size: fi.Size(), Dir: fi.IsDir()}
	}
	return out
}

// Entries converts the listing of a targets.FS (HDFS, SFTP) for List.
func Entries(infos []fs.FileInfo) []Entry { return entries(infos) }

// List dispatches to the file system of fsURI's scheme, which must be a
// Lister.
func (m *Mux) List(ctx context.Context, fsURI, dir string) ([]Entry, error) {
	fsys, fsURI, err := m.route(fsURI)
	if err != nil {
		return nil, err
	}
	l, ok := fsys.(Lister)
	if !ok {
		return nil, fmt.Errorf("file system %q cannot list directories", fsURI)
	}
	return l.List(ctx, fsURI, dir)
}

// List answers from memory or lists the directory once: a step lists each
// distinct (fs, directory) once however many slots and workflows ask.
func (m *Memo) List(ctx context.Context, fsURI, dir string) ([]Entry, error) {
	k := [2]string{fsURI, dir}
	m.mu.Lock()
	r, ok := m.lists[k]
	m.mu.Unlock()
	if ok {
		return r.entries, r.err
	}
	l, isLister := m.fs.(Lister)
	if !isLister {
		return nil, errors.New("the file systems cannot list directories")
	}
	r.entries, r.err = l.List(ctx, fsURI, dir)
	if ctx.Err() == nil {
		m.mu.Lock()
		if m.lists == nil {
			m.lists = make(map[[2]string]listResult)
		}
		m.lists[k] = r
		m.mu.Unlock()
	}
	return r.entries, r.err
}

type listResult struct {
	entries []Entry
	err     error
}

// Volume is what a dataVolume trigger saw: the files matching its glob
// and their total size.
type Volume struct {
	Files, Bytes int64
}

// counted reports whether an entry named name counts for pattern: files
// only, and, as Hadoop's input formats do, no names starting with "_" or
// "." (_SUCCESS, .part-0.crc) unless the pattern starts with that
// character.
func counted(e Entry, pattern string) bool {
	if e.Dir {
		return false
	}
	if h := e.Name[:min(1, len(e.Name))]; (h == "_" || h == ".") && !strings.HasPrefix(pattern, h) {
		return false
	}
	ok, _ := path.Match(pattern, e.Name)
	return ok
}

func evalDataVolume(ctx context.Context, env Env, t *workflow.Trigger, slotTime time.Time) Status {
	glob := external.Expand(t.Path, slotTime)
	need := func() string {
		var parts []string
		if n := deref(t.MinFiles); n > 0 {
			parts = append(parts, fmt.Sprintf("%d files", n))
		}
		if n := deref(t.MinBytes); n > 0 {
			parts = append(parts, bytesText(n))
		}
		if len(parts) == 0 {
			return "nothing"
		}
		return strings.Join(parts, " and ")
	}
	fail := func(err error) Status {
		return failed(TypeDataVolume, fmt.Sprintf("Files matching %s not counted (need %s)", glob, need()), err)
	}
	dir, pattern, err := workflow.GlobDir(glob)
	if err != nil {
		return fail(err)
	}
	l, ok := env.FS.(Lister)
	if env.FS == nil || !ok {
		return fail(errors.New("no file system configured for dataVolume triggers"))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	list, err := l.List(ctx, t.FS, dir)
	if err != nil {
		return fail(fmt.Errorf("list %s: %w", dir, err))
	}
	var v Volume
	for _, e := range list {
		if counted(e, pattern) {
			v.Files++
			v.Bytes += max(0, e.Size)
		}
	}
	ready := v.Files >= deref(t.MinFiles) && v.Bytes >= deref(t.MinBytes)
	word := "not ready"
	if ready {
		word = "ready"
	}
	st := leaf(TypeDataVolume, ready, fmt.Sprintf("%d files, %s match %s: %s (need %s)", v.Files, bytesText(v.Bytes), glob, word, need()))
	st.Files, st.Bytes = &v.Files, &v.Bytes
	return st
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// bytesText writes a size for people: "512 bytes", "4000 bytes (4.0 kB)",
// "100000000000 bytes (100 GB)" (decimal units; the exact count first).
func bytesText(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d bytes", n)
	}
	f, unit := float64(n), ""
	for _, u := range []string{"kB", "MB", "GB", "TB", "PB", "EB"} {
		if f < 999.95 {
			break
		}
		f, unit = f/1000, u
	}
	if f < 9.995 {
		return fmt.Sprintf("%d bytes (%.2f %s)", n, f, unit)
	}
	if f < 99.95 {
		return fmt.Sprintf("%d bytes (%.1f %s)", n, f, unit)
	}
	return fmt.Sprintf("%d bytes (%.0f %s)", n, f, unit)
}
