package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// SFTP is a file system on an SFTP server.
type SFTP struct {
	name        string
	c           *sftp.Client
	posixRename bool
	fsync       bool
	packet      int
}

// sftpPacket is the write size used when the server does not advertise
// limits@openssh.com (the SFTP-safe 32 KiB).
const sftpPacket = 32 * 1024

// openSSHPacket is used against servers that advertise limits@openssh.com
// (OpenSSH 8.7 and later), whose write limit is 256 KiB - 1 KiB. Larger
// payloads kill the connection (sftp.md §3.3).
const openSSHPacket = 255 * 1024

// NewSFTP starts an SFTP session over an SSH connection. name is the URL
// that identifies the server in messages (sftp://user@host:port).
func NewSFTP(name string, conn *ssh.Client) (*SFTP, error) {
	c, err := sftp.NewClient(conn,
		sftp.UseConcurrentWrites(true),
		sftp.UseConcurrentReads(true),
		sftp.MaxConcurrentRequestsPerFile(64),
	)
	if err != nil {
		return nil, fmt.Errorf("%s: start SFTP: %w", name, err)
	}
	return newSFTP(name, c)
}

// NewSFTPClient wraps an existing SFTP client (tests use in-process servers).
func NewSFTPClient(name string, c *sftp.Client) (*SFTP, error) { return newSFTP(name, c) }

func newSFTP(name string, c *sftp.Client) (*SFTP, error) {
	s := &SFTP{name: name, c: c, packet: sftpPacket}
	_, s.posixRename = c.HasExtension("posix-rename@openssh.com")
	_, s.fsync = c.HasExtension("fsync@openssh.com")
	if _, ok := c.HasExtension("limits@openssh.com"); ok {
		s.packet = openSSHPacket
		if err := sftp.MaxPacketUnchecked(s.packet)(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *SFTP) String() string { return s.name }

func (s *SFTP) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sftp.ErrSSHFxConnectionLost) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%s %s%s: %w (%v)", op, s.name, name, ErrConnectionLost, err)
	}
	return &fs.PathError{Op: op, Path: s.name + name, Err: err}
}

func (s *SFTP) Stat(name string) (fs.FileInfo, error) {
	fi, err := s.c.Stat(name)
	return fi, s.wrap("stat", name, err)
}

func (s *SFTP) ReadDir(name string) ([]fs.FileInfo, error) {
	fis, err := s.c.ReadDir(name)
	return fis, s.wrap("readdir", name, err)
}

func (s *SFTP) MkdirAll(name string) error { return s.wrap("mkdir", name, s.c.MkdirAll(name)) }

func (s *SFTP) Open(name string) (io.ReadCloser, error) {
	f, err := s.c.Open(name)
	if err != nil {
		return nil, s.wrap("open", name, err)
	}
	return f, nil
}

func (s *SFTP) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) (err error) {
	f, err := s.c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		if _, serr := s.c.Lstat(name); serr == nil {
			return &fs.PathError{Op: "create", Path: s.name + name, Err: fs.ErrExist}
		}
		return s.wrap("create", name, err)
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				f.Close()
			}
			_ = s.c.Remove(name)
		}
	}()
	if size > int64(s.packet) {
		// Several write requests in flight (pkg/sftp's concurrent writes).
		_, err = f.ReadFromWithConcurrency(ctxReader{ctx, r}, 0)
	} else {
		// One write request.
		buf := make([]byte, size)
		if _, err = io.ReadFull(ctxReader{ctx, r}, buf); err == nil {
			_, err = f.Write(buf)
		}
	}
	if err != nil {
		return s.wrap("write", name, err)
	}
	if durable && s.fsync {
		if err = f.Sync(); err != nil {
			return s.wrap("fsync", name, err)
		}
	}
	closed = true
	if err = f.Close(); err != nil {
		return s.wrap("close", name, err)
	}
	return nil
}

func (s *SFTP) Rename(from, to string) error {
	if s.posixRename {
		return s.wrap("rename", from, s.c.PosixRename(from, to))
	}
	// SFTP v3 rename refuses to replace; without posix-rename the
	// replacement of a file is not atomic.
	err := s.c.Rename(from, to)
	if err != nil {
		if fi, serr := s.c.Lstat(to); serr == nil && !fi.IsDir() {
			if rerr := s.c.Remove(to); rerr == nil {
				err = s.c.Rename(from, to)
			}
		}
	}
	return s.wrap("rename", from, err)
}

func (s *SFTP) Remove(name string) error { return s.wrap("remove", name, s.c.Remove(name)) }

// RemoveAll removes a tree without following symbolic links (pkg/sftp's
// RemoveAll follows one at the top and fails on a missing path). Files of
// a directory are removed several at a time.
func (s *SFTP) RemoveAll(name string) error {
	fi, err := s.c.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return s.wrap("remove", name, err)
	}
	if !fi.IsDir() {
		return s.wrap("remove", name, s.c.Remove(name))
	}
	return s.removeTree(name)
}

func (s *SFTP) removeTree(dir string) error {
	entries, err := s.c.ReadDir(dir)
	if err != nil {
		return s.wrap("readdir", dir, err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, 16)
	)
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if e.IsDir() {
			if err := s.removeTree(p); err != nil {
				return err
			}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.c.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				mu.Lock()
				if firstErr == nil {
					firstErr = s.wrap("remove", p, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return s.wrap("rmdir", dir, s.c.RemoveDirectory(dir))
}

func (s *SFTP) Close() error { return s.c.Close() }
