package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"
	krbclient "github.com/jcmturner/gokrb5/v8/client"

	"github.com/celos-go/celos/targets/hadoopconf"
)

// Defaults of HDFSOptions.
const (
	DefaultHDFSCallTimeout = 20 * time.Second
	DefaultHDFSCoolDown    = 5 * time.Second
)

// HDFSOptions configure the HDFS file systems of an HDFSPool.
type HDFSOptions struct {
	// Client is the user, dial timeout and Kerberos login of every
	// connection (its FS is ignored: the pool names the file system).
	Client hadoopconf.Options
	// CallTimeout bounds one operation on the NameNode (one call of Stat,
	// ReadDir, MkdirAll, Rename, Remove, RemoveAll, Open, the create of
	// WriteNew), connecting included, and each read or write on a
	// NameNode or DataNode connection (default DefaultHDFSCallTimeout). A
	// NameNode that accepts connections and then says nothing costs one
	// CallTimeout, not a hung caller.
	CallTimeout time.Duration
	// CoolDown is how long after a connection failure a file system
	// answers with that failure without dialling again (default
	// DefaultHDFSCoolDown).
	CoolDown time.Duration
}

// HDFSStats are an HDFSPool's counters since NewHDFSPool.
type HDFSStats struct {
	// Calls is the number of operations sent to NameNodes.
	Calls int64
	// Connects counts clients created (the first connection to a file
	// system, and reconnections after a failure).
	Connects int64
}

// HDFSPool keeps one long-lived client per HDFS file system (a NameNode
// or an HA name service, hdfs://authority), built from a Hadoop
// configuration: the connection pool of the scheduler's hdfsCheck
// triggers and of deploy. After a connection failure or a call that got
// no answer within the call timeout, a file system drops its client
// (cutting its connection, which ends the calls stuck on it) and answers
// with that failure, without dialling, for the cool-down. It is safe for
// concurrent use.
type HDFSPool struct {
	conf hadoopconf.Conf
	opts HDFSOptions

	mu  sync.Mutex
	fss map[string]*HDFS

	calls, connects atomic.Int64
}

// NewHDFSPool returns the pool of the HDFS file systems of conf (nil means
// an empty configuration: every hdfs:// URI must then name host:port). No
// connection is made until the first operation.
func NewHDFSPool(conf hadoopconf.Conf, opts HDFSOptions) *HDFSPool {
	if conf == nil {
		conf = hadoopconf.Conf{}
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultHDFSCallTimeout
	}
	if opts.CoolDown <= 0 {
		opts.CoolDown = DefaultHDFSCoolDown
	}
	return &HDFSPool{conf: conf, opts: opts, fss: make(map[string]*HDFS)}
}

// FS returns the file system of uri (hdfs://authority, any path ignored;
// "" means the configuration's fs.defaultFS), the same one for every URI
// of the same authority.
func (p *HDFSPool) FS(uri string) (*HDFS, error) {
	if uri == "" {
		var err error
		if uri, err = p.conf.DefaultFS(); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("file system %q: %v", uri, err)
	}
	if u.Scheme != "hdfs" || u.Host == "" {
		return nil, fmt.Errorf("file system %q is not an hdfs://host URI", uri)
	}
	key := "hdfs://" + strings.ToLower(u.Host)
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.fss[key]
	if !ok {
		h = &HDFS{pool: p, name: key}
		p.fss[key] = h
	}
	return h, nil
}

// Stats returns the counters.
func (p *HDFSPool) Stats() HDFSStats {
	return HDFSStats{Calls: p.calls.Load(), Connects: p.connects.Load()}
}

// Close closes every client.
func (p *HDFSPool) Close() error {
	p.mu.Lock()
	fss := p.fss
	p.fss = make(map[string]*HDFS)
	p.mu.Unlock()
	var errs []error
	for _, h := range fss {
		errs = append(errs, h.Close())
	}
	return errors.Join(errs...)
}

// HDFS is a file system on an HDFS cluster, from an HDFSPool. Every
// operation has a deadline (HDFSOptions.CallTimeout).
type HDFS struct {
	pool *HDFSPool
	name string // hdfs://authority

	mu       sync.Mutex
	cur      *hdfsConn // nil until connected, and after a failure
	failed   error
	failedAt time.Time
}

// hdfsConn is one client and the NameNode connection it currently uses,
// so that a call that gets no answer can be cut off.
type hdfsConn struct {
	client *hdfs.Client
	// krb is the client's own Kerberos login (nil under simple
	// authentication), destroyed with it: its TGT renewal goroutine
	// would otherwise re-log in to the KDC for the life of the process.
	krb *krbclient.Client

	mu      sync.Mutex
	net     net.Conn
	dropped error // why the client was dropped, once it was

	closeOnce sync.Once
	closeErr  error

	// colinmarc/hdfs fetches the server defaults lazily on the first
	// Create or block read, without a lock: concurrent first uses race.
	// They are fetched once under defaultsMu first.
	defaultsMu sync.Mutex
	defaultsOK bool
}

func (c *hdfsConn) closeNet() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.net != nil {
		c.net.Close()
	}
}

// close cuts the connection (ending the calls stuck on it) and closes the
// client, once however many callers drop it.
func (c *hdfsConn) close() error {
	c.closeNet()
	c.closeOnce.Do(func() {
		c.closeErr = c.client.Close()
		destroyKerberos(c.krb)
	})
	return c.closeErr
}

// prime fetches the server defaults once, so that concurrent Create and
// Open calls only read them.
func (c *hdfsConn) prime(name string) error {
	c.defaultsMu.Lock()
	defer c.defaultsMu.Unlock()
	if c.defaultsOK {
		return nil
	}
	if _, err := c.client.ServerDefaults(); err != nil {
		return fmt.Errorf("%s: get server defaults: %w", name, err)
	}
	c.defaultsOK = true
	return nil
}

func (h *HDFS) String() string { return h.name }

// Close closes the client; a later operation connects again.
func (h *HDFS) Close() error {
	h.mu.Lock()
	c := h.cur
	h.cur = nil
	h.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.close()
}

// Exists reports whether name (absolute) exists, a file or a directory.
// Its errors do not name the file system: the caller does.
func (h *HDFS) Exists(ctx context.Context, name string) (bool, error) {
	var found bool
	err := h.do(ctx, "", name, func(c *hdfsConn) error {
		_, err := c.client.Stat(name)
		switch {
		case err == nil:
			found = true
		case errors.Is(err, fs.ErrNotExist):
		default:
			return err
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return found, nil
}

// Ping connects if needed and checks that the NameNode answers (a Stat of
// "/"), bounded by ctx (and each read and write by the call timeout).
func (h *HDFS) Ping(ctx context.Context) error {
	return h.run(ctx, "", "/", func(c *hdfsConn) error {
		_, err := c.client.Stat("/")
		return err
	})
}

func (h *HDFS) Stat(name string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := h.do(context.Background(), "stat", name, func(c *hdfsConn) (err error) {
		fi, err = c.client.Stat(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fi, nil
}

func (h *HDFS) ReadDir(name string) ([]fs.FileInfo, error) {
	var list []fs.FileInfo
	err := h.do(context.Background(), "list", name, func(c *hdfsConn) (err error) {
		list, err = c.client.ReadDir(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

func (h *HDFS) MkdirAll(name string) error {
	return h.do(context.Background(), "mkdir", name, func(c *hdfsConn) error {
		return who(c, c.client.MkdirAll(name, 0o755))
	})
}

// who adds the HDFS user to a permission error: which user was refused is
// the first thing to know about it.
func who(c *hdfsConn, err error) error {
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (as HDFS user %s)", err, c.client.User())
	}
	return err
}

func (h *HDFS) Open(name string) (io.ReadCloser, error) {
	var f *hdfs.FileReader
	err := h.do(context.Background(), "open", name, func(c *hdfsConn) (err error) {
		if err := c.prime(h.name); err != nil {
			return err
		}
		f, err = c.client.Open(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// WriteNew writes a new file. HDFS's Create refuses an existing file, and
// Close may report that the NameNode has not yet seen every replica
// (ErrReplicating): Close is then retried with a back-off, as the Java
// client does. colinmarc/hdfs has no pipeline recovery, so any other
// write error removes the partial file. The create has the call timeout;
// the copy and the close, whose length depends on the size, have it on
// each read and write of their connections.
func (h *HDFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) (err error) {
	var w *hdfs.FileWriter
	var c *hdfsConn
	err = h.do(ctx, "create", name, func(cc *hdfsConn) (err error) {
		if err := cc.prime(h.name); err != nil {
			return err
		}
		w, err = cc.client.Create(name)
		c = cc
		return who(cc, err)
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// A DataNode or the NameNode (addBlock, complete) said
				// nothing within the call timeout.
				h.drop(c, err)
			}
			_ = h.Remove(name)
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

func (h *HDFS) Rename(from, to string) error {
	return h.do(context.Background(), "rename", from, func(c *hdfsConn) error {
		return who(c, c.client.Rename(from, to))
	})
}

func (h *HDFS) Remove(name string) error {
	return h.do(context.Background(), "remove", name, func(c *hdfsConn) error {
		return who(c, c.client.Remove(name))
	})
}

func (h *HDFS) RemoveAll(name string) error {
	return h.do(context.Background(), "remove", name, func(c *hdfsConn) error {
		return who(c, c.client.RemoveAll(name))
	})
}

// do runs f on the client, connecting first if needed, and waits for it
// at most the call timeout (and while ctx lasts). An error of f is
// returned as it is; when it shows the connection is broken, the client
// is dropped. The errors of the layer itself (no connection, no answer)
// start with "op hdfs://authority/name: " when op is set.
func (h *HDFS) do(ctx context.Context, op, name string, f func(*hdfsConn) error) error {
	ctx, cancel := context.WithTimeout(ctx, h.pool.opts.CallTimeout)
	defer cancel()
	return h.run(ctx, op, name, f)
}

// run is do bounded by ctx alone.
func (h *HDFS) run(ctx context.Context, op, name string, f func(*hdfsConn) error) error {
	ours := func(err error) error {
		if op == "" {
			return err
		}
		return fmt.Errorf("%s %s%s: %w", op, h.name, name, err)
	}
	c, err := h.client(ctx)
	if err != nil {
		return ours(err)
	}
	done := make(chan error, 1)
	h.pool.calls.Add(1)
	go func() { done <- f(c) }()
	select {
	case err := <-done:
		if err != nil && connFailure(err) {
			if cause := c.cause(); cause != nil {
				// Cut off because another call got no answer: say so
				// rather than "use of closed network connection".
				return ours(cause)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// The connection's own deadline (the same bound as the
				// call's) fired before ctx did: the same stall, said the
				// same way, whichever of the two timers won the race.
				err = fmt.Errorf("no answer from the NameNode: %w", err)
				h.drop(c, err)
				return ours(err)
			}
		}
		h.check(c, err)
		return err
	case <-ctx.Done():
		err := fmt.Errorf("no answer from the NameNode: %w", context.Cause(ctx))
		h.drop(c, err)
		return ours(err)
	}
}

// check drops c when err shows its connection failed (not the call).
func (h *HDFS) check(c *hdfsConn, err error) {
	if err != nil && connFailure(err) {
		h.drop(c, err)
	}
}

// connFailure reports whether err means the connection failed rather than
// the NameNode refusing the call (an exception such as
// AccessControlException, a missing file) or the library refusing it (a
// path error of its own, such as "is a directory"): after it the client
// must not be reused, since colinmarc/hdfs keeps a connection whose
// answer never came and would read it as the next call's.
func connFailure(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up
	}
	var remote hdfs.Error
	if errors.As(err, &remote) {
		return false
	}
	for _, e := range []error{fs.ErrNotExist, fs.ErrExist, fs.ErrPermission, fs.ErrInvalid, syscall.ENOTEMPTY, hdfs.ErrReplicating} {
		if errors.Is(err, e) {
			return false
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		var ne net.Error
		msg := pe.Err.Error()
		return errors.As(pe.Err, &ne) || errors.Is(pe.Err, io.EOF) || errors.Is(pe.Err, io.ErrUnexpectedEOF) ||
			errors.Is(pe.Err, net.ErrClosed) || strings.Contains(msg, "namenode") || strings.Contains(msg, "sequence number")
	}
	return true
}

// drop forgets a client after a connection failure, cuts its connection
// (which ends the calls stuck on it) and closes it in the background. The
// first failure of a client is the one the cool-down answers with: the
// calls cut off after it fail because of it.
func (h *HDFS) drop(c *hdfsConn, err error) {
	c.mu.Lock()
	first := c.dropped == nil
	if first {
		c.dropped = err
	}
	c.mu.Unlock()
	h.mu.Lock()
	if h.cur == c {
		h.cur = nil
	}
	if first {
		h.failed, h.failedAt = err, time.Now()
	}
	h.mu.Unlock()
	c.closeNet()
	go c.close()
}

// cause is the failure c was dropped for, nil while it is in use.
func (c *hdfsConn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// hdfsConnectError is a failed connection to a file system's NameNodes.
type hdfsConnectError struct {
	addrs string
	err   error
}

func (e *hdfsConnectError) Error() string { return "connect to " + e.addrs + ": " + e.err.Error() }
func (e *hdfsConnectError) Unwrap() error { return e.err }

// client returns the kept client, connecting if needed.
func (h *HDFS) client(ctx context.Context) (*hdfsConn, error) {
	p := h.pool
	h.mu.Lock()
	if c := h.cur; c != nil {
		h.mu.Unlock()
		return c, nil
	}
	if h.failed != nil && time.Since(h.failedAt) < p.opts.CoolDown {
		err := h.failed
		h.mu.Unlock()
		return nil, fmt.Errorf("%w (not retried for %s)", err, p.opts.CoolDown)
	}
	h.mu.Unlock()
	o := p.opts.Client
	o.FS = h.name
	co, err := p.conf.ClientOptions(o)
	if err != nil {
		return nil, err
	}
	c := &hdfsConn{krb: co.KerberosClient}
	timeout := p.opts.CallTimeout
	co.NamenodeDialFunc = deadlineDial(co.NamenodeDialFunc, timeout, func(nc net.Conn) {
		c.mu.Lock()
		c.net = nc
		c.mu.Unlock()
	})
	co.DatanodeDialFunc = deadlineDial(co.DatanodeDialFunc, timeout, nil)
	type result struct {
		cl  *hdfs.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		cl, err := hdfs.NewClient(co)
		done <- result{cl, err}
	}()
	var r result
	late := false
	select {
	case r = <-done:
	case <-ctx.Done():
		late = true
		c.closeNet()
		r.err = fmt.Errorf("connect: %w", context.Cause(ctx))
		go func() {
			if r := <-done; r.cl != nil {
				r.cl.Close()
			}
			destroyKerberos(c.krb)
		}()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.err != nil {
		if !late {
			destroyKerberos(c.krb) // else when the late client is closed
		}
		err := &hdfsConnectError{addrs: strings.Join(co.Addresses, ","), err: r.err}
		h.failed, h.failedAt = err, time.Now()
		return nil, err
	}
	p.connects.Add(1)
	if prev := h.cur; prev != nil { // another call connected first
		go func() {
			r.cl.Close()
			destroyKerberos(c.krb)
		}()
		return prev, nil
	}
	c.client = r.cl
	h.cur = c
	h.failed = nil
	return c, nil
}

// destroyKerberos ends a connection's Kerberos login (nil: none).
func destroyKerberos(kc *krbclient.Client) {
	if kc != nil {
		kc.Destroy()
	}
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// deadlineDial bounds dial's connection attempts by timeout (colinmarc/hdfs
// dials with a background context) and every read and write of the
// connections it makes; seen, if set, is told of each connection.
func deadlineDial(dial dialFunc, timeout time.Duration, seen func(net.Conn)) dialFunc {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		dc := &deadlineConn{Conn: nc, timeout: timeout}
		if seen != nil {
			seen(dc)
		}
		return dc, nil
	}
}

// deadlineConn bounds every read and write, so a server that accepts a
// connection and then hangs cannot block a client forever.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (d *deadlineConn) Read(b []byte) (int, error) {
	d.Conn.SetReadDeadline(time.Now().Add(d.timeout))
	return d.Conn.Read(b)
}

func (d *deadlineConn) Write(b []byte) (int, error) {
	d.Conn.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.Conn.Write(b)
}
