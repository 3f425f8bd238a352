package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// HDFS is a file system on an HDFS cluster.
type HDFS struct {
	name string
	c    *hdfs.Client

	// colinmarc/hdfs fetches the server defaults lazily on the first
	// Create or block read, without a lock: concurrent first uses race.
	// They are fetched once under defaultsMu first.
	defaultsMu sync.Mutex
	defaultsOK bool
}

// prime fetches the server defaults once, so that concurrent Create and
// Open calls only read them.
func (h *HDFS) prime() error {
	h.defaultsMu.Lock()
	defer h.defaultsMu.Unlock()
	if h.defaultsOK {
		return nil
	}
	if _, err := h.c.ServerDefaults(); err != nil {
		return fmt.Errorf("%s: get server defaults: %w", h.name, err)
	}
	h.defaultsOK = true
	return nil
}

// NewHDFS wraps a connected client; name is the hdfs:// URI for messages.
func NewHDFS(name string, c *hdfs.Client) *HDFS { return &HDFS{name: name, c: c} }

// Client returns the underlying client.
func (h *HDFS) Client() *hdfs.Client { return h.c }

func (h *HDFS) String() string { return h.name }

func (h *HDFS) Stat(name string) (fs.FileInfo, error) { return h.c.Stat(name) }

func (h *HDFS) ReadDir(name string) ([]fs.FileInfo, error) { return h.c.ReadDir(name) }

func (h *HDFS) MkdirAll(name string) error { return h.who(h.c.MkdirAll(name, 0o755)) }

// who adds the HDFS user to a permission error: which user was refused is
// the first thing to know about it.
func (h *HDFS) who(err error) error {
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (as HDFS user %s)", err, h.c.User())
	}
	return err
}

func (h *HDFS) Open(name string) (io.ReadCloser, error) {
	if err := h.prime(); err != nil {
		return nil, err
	}
	return h.c.Open(name)
}

// WriteNew writes a new file. HDFS's Create refuses an existing file, and
// Close may report that the NameNode has not yet seen every replica
// (ErrReplicating): Close is then retried with a back-off, as the Java
// client does. colinmarc/hdfs has no pipeline recovery, so any other
// write error removes the partial file.
func (h *HDFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) (err error) {
	if err := h.prime(); err != nil {
		return err
	}
	w, err := h.c.Create(name)
	if err != nil {
		return h.who(err)
	}
	defer func() {
		if err != nil {
			_ = h.c.Remove(name)
		}
	}()
	if _, err = io.Copy(w, ctxReader{ctx, r}); err != nil {
		w.Close()
		return fmt.Errorf("write %s%s: %w", h.name, name, err)
	}
	delay := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err = w.Close()
		if err == nil || !hdfs.IsErrReplicating(err) || attempt == 10 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
	if err != nil {
		return fmt.Errorf("close %s%s: %w", h.name, name, err)
	}
	return nil
}

func (h *HDFS) Rename(from, to string) error { return h.who(h.c.Rename(from, to)) }

func (h *HDFS) Remove(name string) error { return h.who(h.c.Remove(name)) }

func (h *HDFS) RemoveAll(name string) error { return h.who(h.c.RemoveAll(name)) }

func (h *HDFS) Close() error { return h.c.Close() }
