package trigger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"syscall"

	"github.com/celos-go/celos/targets"
)

// Local is the FileSystems of the local file system, targets.Local (the
// one deploy writes file: targets with): fs URIs "file:", "file:/" and
// "file:///" (a host other than localhost is refused). A relative path is
// relative to the server's working directory. A path below a regular
// file does not exist.
type Local struct{}

// Exists reports whether path exists on the local file system.
func (Local) Exists(ctx context.Context, fsURI, path string) (bool, error) {
	if err := localURI(fsURI); err != nil {
		return false, err
	}
	if path == "" {
		return false, errors.New("empty path")
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	_, err := targets.Local{}.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return false, nil
	}
	return false, err
}

// localURI checks that fsURI ("" allowed) names the local file system.
func localURI(fsURI string) error {
	if fsURI == "" {
		return nil
	}
	u, err := url.Parse(fsURI)
	if err != nil {
		return fmt.Errorf("file system %q: %w", fsURI, err)
	}
	if u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return fmt.Errorf("file system %q is not a local file: URI", fsURI)
	}
	return nil
}

// Mux routes existence checks by the scheme of the fs URI. An empty fs URI
// means Default, the installation default (CELOS_DEFAULT_HDFS).
type Mux struct {
	// Default is the fs URI used for triggers that name none.
	Default string
	schemes map[string]FileSystems
}

// NewMux returns a Mux that serves "file" URIs with Local and uses
// defaultURI for triggers that name no file system. Add others with Handle.
func NewMux(defaultURI string) *Mux {
	return &Mux{Default: defaultURI, schemes: map[string]FileSystems{"file": Local{}}}
}

// Handle serves fs URIs of the scheme ("hdfs") with fsys.
func (m *Mux) Handle(scheme string, fsys FileSystems) { m.schemes[strings.ToLower(scheme)] = fsys }

// Exists dispatches to the file system of fsURI's scheme.
func (m *Mux) Exists(ctx context.Context, fsURI, path string) (bool, error) {
	fsys, fsURI, err := m.route(fsURI)
	if err != nil {
		return false, err
	}
	return fsys.Exists(ctx, fsURI, path)
}

// route returns the file systems of fsURI ("" is Default) and the URI.
func (m *Mux) route(fsURI string) (FileSystems, string, error) {
	if fsURI == "" {
		fsURI = m.Default
	}
	if fsURI == "" {
		return nil, "", errors.New("the trigger names no file system and the installation has no default (CELOS_DEFAULT_HDFS in --defaults, or fs.defaultFS in the Hadoop configuration of --hadoop-conf / HADOOP_CONF_DIR)")
	}
	i := strings.IndexByte(fsURI, ':')
	if i <= 0 {
		return nil, "", fmt.Errorf("file system %q has no scheme (want file:/// or hdfs://host:port)", fsURI)
	}
	fsys, ok := m.schemes[strings.ToLower(fsURI[:i])]
	if !ok {
		return nil, "", fmt.Errorf("file system %q: no support for scheme %q", fsURI, fsURI[:i])
	}
	return fsys, fsURI, nil
}

// Memo remembers the answers of a FileSystems, errors included, so that a
// step asks about each distinct (fs, path) once however many triggers name
// it, and lists each distinct (fs, directory) once (List). Make one per
// step.
type Memo struct {
	fs    FileSystems
	mu    sync.Mutex
	m     map[[2]string]memoResult
	lists map[[2]string]listResult
}

type memoResult struct {
	ok  bool
	err error
}

// NewMemo wraps fsys.
func NewMemo(fsys FileSystems) *Memo {
	return &Memo{fs: fsys, m: make(map[[2]string]memoResult)}
}

// Exists answers from memory or asks the wrapped file systems once.
func (m *Memo) Exists(ctx context.Context, fsURI, path string) (bool, error) {
	k := [2]string{fsURI, path}
	m.mu.Lock()
	r, ok := m.m[k]
	m.mu.Unlock()
	if ok {
		return r.ok, r.err
	}
	r.ok, r.err = m.fs.Exists(ctx, fsURI, path)
	if ctx.Err() == nil { // a cancelled step's answer says nothing about the path
		m.mu.Lock()
		m.m[k] = r
		m.mu.Unlock()
	}
	return r.ok, r.err
}
