package targets

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/celos-go/celos/internal/regfile"
)

// Local is the local file system (file: URLs).
type Local struct{}

func (Local) String() string { return "file://" }

func (Local) Stat(name string) (fs.FileInfo, error) { return os.Stat(filepath.FromSlash(name)) }

func (Local) ReadDir(name string) ([]fs.FileInfo, error) {
	entries, err := os.ReadDir(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	infos := make([]fs.FileInfo, 0, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func (Local) MkdirAll(name string) error { return os.MkdirAll(filepath.FromSlash(name), 0o755) }

// Open opens a regular file (or a symbolic link to one) for reading. A
// FIFO, a device, a socket or a directory is refused (errors.Is
// regfile.ErrNotRegular) without blocking: a FIFO is never opened for
// reading in blocking mode.
func (Local) Open(name string) (io.ReadCloser, error) {
	f, _, err := regfile.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (Local) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) (err error) {
	p := filepath.FromSlash(name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(p)
		}
	}()
	if _, err = io.Copy(f, ctxReader{ctx, r}); err != nil {
		return err
	}
	if durable {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	return f.Close()
}

func (Local) Rename(from, to string) error {
	return os.Rename(filepath.FromSlash(from), filepath.FromSlash(to))
}

func (Local) Remove(name string) error { return os.Remove(filepath.FromSlash(name)) }

func (Local) RemoveAll(name string) error { return os.RemoveAll(filepath.FromSlash(name)) }

func (Local) Close() error { return nil }

// ctxReader stops a copy when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
