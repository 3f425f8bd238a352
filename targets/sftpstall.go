package targets

// A deadline for SFTP requests. The SSH keep-alive (ssh.go) closes a
// connection whose server stopped answering, but not one whose SSH side
// answers while an SFTP session does not: an sftp-server process stuck on
// a hung mount, or stopped. pkg/sftp has no per-request deadline, and its
// Close waits for the session's reader, so a request there waited for
// ever. Each session's stream is watched instead: the SFTP packets sent
// and received are counted (every request has exactly one response), and
// when requests wait and nothing has arrived for the timeout, the SSH
// connection is closed, which fails every request in flight.

import (
	"encoding/binary"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// DefaultSFTPTimeout is how long an SFTP request may wait without any
// answer from the server (Connector.SFTPTimeout).
const DefaultSFTPTimeout = 60 * time.Second

// stallWatch watches the sessions of one SSH connection.
type stallWatch struct {
	timeout time.Duration
	conn    *ssh.Client
	stop    chan struct{}
	once    sync.Once
	// stalled is set once the connection was closed for a stall.
	stalled atomic.Bool

	mu       sync.Mutex
	sessions []*sessionWatch
}

// sessionWatch is one session's packet counts.
type sessionWatch struct {
	mu      sync.Mutex
	sent    frameCounter
	got     frameCounter
	waiting time.Time // the last answer, or the first request after none waited
}

// frameCounter counts the SFTP packets of a stream (uint32 length, then
// the packet), however the stream is cut into reads or writes.
type frameCounter struct {
	hdr     [4]byte
	have    int    // bytes of hdr read
	left    uint32 // bytes of the current packet still to come
	packets int64
}

func (f *frameCounter) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(uint32(len(p)), f.left)
			f.left -= n
			p = p[n:]
			continue
		}
		n := copy(f.hdr[f.have:], p)
		f.have += n
		p = p[n:]
		if f.have == 4 {
			f.have = 0
			f.left = binary.BigEndian.Uint32(f.hdr[:])
			f.packets++
		}
	}
}

func newStallWatch(conn *ssh.Client, timeout time.Duration) *stallWatch {
	if timeout <= 0 {
		timeout = DefaultSFTPTimeout
	}
	w := &stallWatch{timeout: timeout, conn: conn, stop: make(chan struct{})}
	go w.run()
	return w
}

// run checks the sessions a few times per timeout until close.
func (w *stallWatch) run() {
	t := time.NewTicker(min(w.timeout/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-t.C:
			if w.anyStalled(now) {
				w.stalled.Store(true)
				w.conn.Close()
				return
			}
		}
	}
}

func (w *stallWatch) anyStalled(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sessions {
		s.mu.Lock()
		stalled := s.sent.packets > s.got.packets && now.Sub(s.waiting) > w.timeout
		s.mu.Unlock()
		if stalled {
			return true
		}
	}
	return false
}

func (w *stallWatch) close() { w.once.Do(func() { close(w.stop) }) }

// session watches a new session's stream: rd what the server sends, wr
// what is sent to it.
func (w *stallWatch) session(rd io.Reader, wr io.WriteCloser) (io.Reader, io.WriteCloser) {
	s := &sessionWatch{}
	w.mu.Lock()
	w.sessions = append(w.sessions, s)
	w.mu.Unlock()
	return watchedReader{rd, s}, watchedWriter{wr, s}
}

type watchedReader struct {
	r io.Reader
	s *sessionWatch
}

func (r watchedReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.s.mu.Lock()
		r.s.got.feed(p[:n])
		r.s.waiting = time.Now()
		r.s.mu.Unlock()
	}
	return n, err
}

type watchedWriter struct {
	w io.WriteCloser
	s *sessionWatch
}

// Write counts the packets before they are sent: a write the server does
// not take (its SSH window full) is a request waiting too.
func (w watchedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	if w.s.sent.packets <= w.s.got.packets {
		w.s.waiting = time.Now()
	}
	w.s.sent.feed(p)
	w.s.mu.Unlock()
	return w.w.Write(p)
}

func (w watchedWriter) Close() error { return w.w.Close() }
