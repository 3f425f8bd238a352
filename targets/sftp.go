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
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// SFTP is a file system on an SFTP server.
//
// Uploads (WriteNew) are spread over several SFTP sessions of the same SSH
// connection, opened on the first upload: one SFTP session is served by
// one sftp-server process that handles its requests one after the other,
// so many small files in flight on one session queue behind each other
// (and behind a big file's writes). Every other operation uses the first
// session. A file is opened, written and closed on one session; the
// server's file system makes it visible to the others once closed.
type SFTP struct {
	name        string
	c           *sftp.Client
	conn        *ssh.Client // nil for NewSFTPClient: no extra sessions
	watch       *stallWatch // nil for NewSFTPClient
	posixRename bool
	hardlink    bool
	fsync       bool
	packet      int

	poolOnce sync.Once
	poolMu   sync.Mutex
	pool     []*sftpSession // upload sessions; pool[0].c == c
}

// sftpSession is one upload session and the number of files being
// written on it.
type sftpSession struct {
	c      *sftp.Client
	active int
}

// uploadSessions is the number of SFTP sessions uploads are spread over.
// OpenSSH's default MaxSessions is 10; a server that refuses extra
// sessions is used with the ones it granted.
const uploadSessions = 4

// sftpPacket is the write size used when the server does not advertise
// limits@openssh.com (the SFTP-safe 32 KiB).
const sftpPacket = 32 * 1024

// openSSHPacket is used against servers that advertise limits@openssh.com
// (OpenSSH 8.7 and later), whose write limit is 256 KiB - 1 KiB. Larger
// payloads kill the connection (sftp.md §3.3).
const openSSHPacket = 255 * 1024

// NewSFTP starts an SFTP session over an SSH connection. name is the URL
// that identifies the server in messages (sftp://user@host:port). A
// request that waits timeout (DefaultSFTPTimeout when 0) without any
// answer from the server closes conn (sftpstall.go).
func NewSFTP(name string, conn *ssh.Client, timeout time.Duration) (*SFTP, error) {
	w := newStallWatch(conn, timeout)
	c, err := newSFTPSession(conn, w)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("%s: start SFTP: %w", name, err)
	}
	s, err := newSFTP(name, c)
	if err != nil {
		w.close()
		c.Close()
		return nil, err
	}
	s.conn, s.watch = conn, w
	return s, nil
}

// newSFTPSession starts an SFTP session on conn, watched by w.
func newSFTPSession(conn *ssh.Client, w *stallWatch) (*sftp.Client, error) {
	sess, err := conn.NewSession()
	if err != nil {
		return nil, err
	}
	wr, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	rd, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	if err := sess.RequestSubsystem("sftp"); err != nil {
		sess.Close()
		return nil, err
	}
	rd, wr = w.session(rd, wr)
	c, err := sftp.NewClientPipe(rd, wr,
		sftp.UseConcurrentWrites(true),
		sftp.UseConcurrentReads(true),
		sftp.MaxConcurrentRequestsPerFile(64),
	)
	if err != nil {
		sess.Close()
		return nil, err
	}
	return c, nil
}

// session returns the upload session with the fewest files in flight;
// done must be called when the file is written.
func (s *SFTP) session() (c *sftp.Client, done func()) {
	s.poolOnce.Do(s.openPool)
	s.poolMu.Lock()
	if len(s.pool) == 0 { // closed
		s.poolMu.Unlock()
		return s.c, func() {}
	}
	best := s.pool[0]
	for _, p := range s.pool[1:] {
		if p.active < best.active {
			best = p
		}
	}
	best.active++
	s.poolMu.Unlock()
	return best.c, func() {
		s.poolMu.Lock()
		best.active--
		s.poolMu.Unlock()
	}
}

// sessions is the number of upload sessions.
func (s *SFTP) sessions() int {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	return len(s.pool)
}

// openPool opens the extra upload sessions. A session the server refuses
// is not an error: uploads use the sessions there are.
func (s *SFTP) openPool() {
	pool := []*sftpSession{{c: s.c}}
	for i := 1; s.conn != nil && i < uploadSessions; i++ {
		c, err := newSFTPSession(s.conn, s.watch)
		if err != nil {
			break
		}
		if s.packet != sftpPacket {
			if err := sftp.MaxPacketUnchecked(s.packet)(c); err != nil {
				c.Close()
				break
			}
		}
		pool = append(pool, &sftpSession{c: c})
	}
	s.poolMu.Lock()
	s.pool = pool
	s.poolMu.Unlock()
}

func newSFTP(name string, c *sftp.Client) (*SFTP, error) {
	s := &SFTP{name: name, c: c, packet: sftpPacket}
	_, s.posixRename = c.HasExtension("posix-rename@openssh.com")
	_, s.fsync = c.HasExtension("fsync@openssh.com")
	_, s.hardlink = c.HasExtension("hardlink@openssh.com")
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
	if s.watch != nil && s.watch.stalled.Load() {
		return fmt.Errorf("%s %s%s: no answer from the SFTP server within %s, connection closed: %w (%v)", op, s.name, name, s.watch.timeout, ErrConnectionLost, err)
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
	c, done := s.session()
	defer done()
	f, err := c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		if _, serr := c.Lstat(name); serr == nil {
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
			_ = c.Remove(name)
		}
	}()
	if size >= splitMin && s.sessions() > 1 {
		// Written through every session at once.
		err = s.writeSplit(ctx, name, c, f, r, size)
	} else if size > int64(s.packet) {
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

// A file of at least splitMin bytes is written through every upload
// session at once, in chunks of splitChunk bytes, splitWorkers chunks in
// flight per session: one SSH channel carries at most the server's window
// (OpenSSH: 2 MiB) unacknowledged, so a big file on one session waits on
// window adjustments, and one sftp-server process does all its writes.
const (
	splitMin     = 8 << 20
	splitChunk   = 2 << 20
	splitWorkers = 2
)

// writeSplit writes the size bytes of r into name, which first is open on
// its creating session. name is opened on every other session too; chunks
// are read from r in order and written at their offsets by workers of
// all sessions. The extra handles are closed before it returns.
func (s *SFTP) writeSplit(ctx context.Context, name string, c *sftp.Client, first *sftp.File, r io.Reader, size int64) error {
	files := []*sftp.File{first}
	defer func() {
		for _, f := range files[1:] {
			f.Close()
		}
	}()
	s.poolMu.Lock()
	pool := s.pool
	s.poolMu.Unlock()
	for _, p := range pool {
		if p.c == c {
			continue
		}
		f, err := p.c.OpenFile(name, os.O_WRONLY)
		if err != nil {
			return fmt.Errorf("open on another session: %w", err)
		}
		files = append(files, f)
	}
	type chunk struct {
		buf []byte
		off int64
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		work     = make(chan chunk)
		free     = make(chan []byte, len(files)*splitWorkers+1)
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	for i := 0; i < cap(free); i++ {
		free <- make([]byte, splitChunk)
	}
	for _, f := range files {
		for w := 0; w < splitWorkers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := range work {
					if ctx.Err() == nil {
						if _, err := f.WriteAt(c.buf, c.off); err != nil {
							fail(err)
						}
					}
					free <- c.buf[:cap(c.buf)]
				}
			}()
		}
	}
	cr := ctxReader{ctx, r}
	var off int64
read:
	for off < size {
		var buf []byte
		select {
		case buf = <-free:
		case <-ctx.Done():
			break read
		}
		n := min(int64(len(buf)), size-off)
		if _, err := io.ReadFull(cr, buf[:n]); err != nil {
			fail(err)
			break
		}
		select {
		case work <- chunk{buf[:n], off}:
		case <-ctx.Done():
			break read
		}
		off += n
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, f := range files[1:] {
		if err := f.Close(); err != nil {
			return fmt.Errorf("close on another session: %w", err)
		}
	}
	files = files[:1]
	return nil
}

// Close ends every SFTP session (not the SSH connection).
func (s *SFTP) Close() error {
	s.poolMu.Lock()
	pool := s.pool
	s.pool = nil
	s.poolMu.Unlock()
	if s.watch != nil {
		s.watch.close()
	}
	err := s.c.Close()
	for _, p := range pool {
		if p.c != s.c {
			p.c.Close()
		}
	}
	return err
}
