package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/internal/regfile"
)

// Bounds on what the compiler reads of a project.
const (
	// MaxInputFileSize bounds one file the compiler reads: a .cue file,
	// cue.mod's module file, a file of an imported package, an embedded
	// file. The bytes read count, not the size the file system reports.
	MaxInputFileSize = 64 << 20
	// MaxInputSize bounds all the files of one compilation together.
	MaxInputSize = 256 << 20
)

// errOutsideModule is wrapped by the error for a file whose real path
// (symbolic links resolved) is not inside the CUE module.
var errOutsideModule = errors.New("outside the module")

// inputFS is the file system the compiler reads a project through: the
// host's, rooted at "/", with the compiler's overlay (the embedded schema,
// a synthetic module file, the check file) on top. What it has read is
// handed to cue/load as its overlay, so that every file CUE parses or
// embeds was read here. (cue/load's own load.Config.FS cannot stand in:
// in v0.17 it cannot resolve packages vendored under cue.mod/pkg.) A file is read only when it is a regular file whose
// real path lies inside the module root, at most MaxInputFileSize bytes of
// it and MaxInputSize bytes of all files together; FIFOs and devices are
// never opened for reading in blocking mode. Each file is read once: what
// the compiler checks is what CUE parses. Refusals are recorded so that
// the compiler can report them by file name.
type inputFS struct {
	realRoot string              // the module root, symbolic links resolved
	overlay  map[string][]byte   // host path → content
	dirs     map[string][]string // host directory implied by the overlay → names of its overlaid children

	mu      sync.Mutex
	cache   map[string]cachedFile
	total   int64
	refused []refusal
}

type cachedFile struct {
	data []byte
	info fs.FileInfo
	err  error
}

type refusal struct {
	path string // host path
	err  error  // the reason, without the path
}

func newInputFS(root string, overlay map[string][]byte) (*inputFS, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	f := &inputFS{
		realRoot: real,
		overlay:  map[string][]byte{},
		dirs:     map[string][]string{},
		cache:    map[string]cachedFile{},
	}
	for p, data := range overlay {
		p = filepath.Clean(p)
		f.overlay[p] = data
		for child, dir := p, filepath.Dir(p); ; child, dir = dir, filepath.Dir(dir) {
			name := filepath.Base(child)
			if !contains(f.dirs[dir], name) {
				f.dirs[dir] = append(f.dirs[dir], name)
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return f, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hostPath turns an fs.FS name into the host path it stands for.
func hostPath(name string) string {
	if name == "." {
		return "/"
	}
	return "/" + name
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// read returns the content of the file at host path p, checked as the
// type's comment says. Errors are *fs.PathError naming p.
func (f *inputFS) read(p string) ([]byte, fs.FileInfo, error) {
	p = filepath.Clean(p)
	if data, ok := f.overlay[p]; ok {
		return data, memInfo{name: filepath.Base(p), size: int64(len(data))}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.cache[p]; ok {
		return c.data, c.info, c.err
	}
	data, info, err := f.readHost(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.refused = append(f.refused, refusal{path: p, err: err})
	}
	if err != nil {
		err = pathErr("read", p, err)
	}
	f.cache[p] = cachedFile{data, info, err}
	return data, info, err
}

func (f *inputFS) readHost(p string) ([]byte, fs.FileInfo, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	if err := regfile.Check(fi); err != nil {
		return nil, nil, err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	if real != f.realRoot && !strings.HasPrefix(real, f.realRoot+string(filepath.Separator)) {
		return nil, nil, fmt.Errorf("resolves to %s, %w %s (a project reads only files inside its CUE module)", real, errOutsideModule, f.realRoot)
	}
	// Read the real path: the file checked is the file read.
	file, _, err := regfile.Open(real)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	defer file.Close()
	limit := int64(MaxInputFileSize)
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > limit {
		return nil, nil, &regfile.SizeError{Limit: limit}
	}
	if f.total += int64(len(data)); f.total > MaxInputSize {
		return nil, nil, &regfile.SizeError{Limit: MaxInputSize, What: "the project's files together"}
	}
	return data, memInfo{name: fi.Name(), size: int64(len(data)), mod: fi.ModTime()}, nil
}

// loaded returns the host files read so far (not the overlay).
func (f *inputFS) loaded() map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]byte, len(f.cache))
	for p, c := range f.cache {
		if c.err == nil {
			out[p] = c.data
		}
	}
	return out
}

// refusals returns the files refused so far.
func (f *inputFS) refusals() []refusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]refusal(nil), f.refused...)
}

// isDir reports whether host path p is a directory (on the host, through
// symbolic links, or implied by the overlay), with its FileInfo.
func (f *inputFS) isDir(p string) (fs.FileInfo, bool) {
	if fi, err := os.Stat(p); err == nil {
		return fi, fi.IsDir()
	}
	if _, ok := f.dirs[p]; ok {
		return memInfo{name: filepath.Base(p), dir: true}, true
	}
	return nil, false
}

func (f *inputFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, pathErr("open", name, fs.ErrInvalid)
	}
	p := hostPath(name)
	if _, ok := f.overlay[p]; !ok {
		if fi, ok := f.isDir(p); ok {
			entries, err := f.ReadDir(name)
			if err != nil {
				return nil, err
			}
			return &dirFile{info: fi, entries: entries}, nil
		}
	}
	data, info, err := f.read(p)
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(data), info: info}, nil
}

func (f *inputFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, pathErr("read", name, fs.ErrInvalid)
	}
	data, _, err := f.read(hostPath(name))
	if err != nil {
		return nil, err
	}
	return bytes.Clone(data), nil
}

func (f *inputFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, pathErr("stat", name, fs.ErrInvalid)
	}
	p := hostPath(name)
	if data, ok := f.overlay[p]; ok {
		return memInfo{name: path.Base(name), size: int64(len(data))}, nil
	}
	if fi, ok := f.isDir(p); ok {
		return fi, nil
	}
	return os.Stat(p)
}

func (f *inputFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, pathErr("readdir", name, fs.ErrInvalid)
	}
	p := hostPath(name)
	byName := map[string]fs.DirEntry{}
	host, err := os.ReadDir(p)
	if err != nil {
		if _, ok := f.dirs[p]; !ok {
			return nil, err
		}
	}
	for _, e := range host {
		byName[e.Name()] = e
	}
	for _, child := range f.dirs[p] {
		cp := filepath.Join(p, child)
		if data, ok := f.overlay[cp]; ok {
			byName[child] = fs.FileInfoToDirEntry(memInfo{name: child, size: int64(len(data))})
		} else if _, ok := byName[child]; !ok {
			byName[child] = fs.FileInfoToDirEntry(memInfo{name: child, dir: true})
		}
	}
	out := make([]fs.DirEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// memInfo describes a file read into memory, or a directory.
type memInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (m *memFile) Stat() (fs.FileInfo, error) { return m.info, nil }
func (m *memFile) Close() error               { return nil }

type dirFile struct {
	info    fs.FileInfo
	entries []fs.DirEntry
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, pathErr("read", d.info.Name(), errors.New("is a directory"))
}
func (d *dirFile) Close() error { return nil }
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	if n > len(d.entries) {
		n = len(d.entries)
	}
	out := d.entries[:n]
	d.entries = d.entries[n:]
	return out, nil
}
