// Package hdfscheck answers the hdfsCheck trigger's question, "does this
// path exist?", on HDFS: it implements trigger.FileSystems for hdfs:// file
// systems with one long-lived client per file system (NameNode or HA name
// service), built from the installation's Hadoop configuration by
// targets/hadoopconf.
//
// A NameNode that is down, unreachable or hanging makes Exists return the
// error quickly (the trigger is then "not ready, with the error"); it never
// blocks a step for longer than the call timeout and never panics. After a
// connection failure the file system is not dialled again for a short
// cool-down, so a step over many triggers of a dead NameNode fails fast.
package hdfscheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// Defaults of Options.
const (
	DefaultCallTimeout = 20 * time.Second
	DefaultCoolDown    = 5 * time.Second
)

// Options tune New.
type Options struct {
	// User is the HDFS user under simple authentication ("" means
	// $HADOOP_USER_NAME, else the OS user); ignored under Kerberos.
	User string
	// CallTimeout bounds one existence check, connecting included
	// (default DefaultCallTimeout).
	CallTimeout time.Duration
	// DialTimeout bounds one connection attempt (default: hadoopconf's).
	DialTimeout time.Duration
	// CoolDown is how long after a connection failure a file system
	// answers with that failure without dialling again (default
	// DefaultCoolDown).
	CoolDown time.Duration
	// Keytab and Principal log in to Kerberos with a keytab (see
	// hadoopconf.Options).
	Keytab, Principal string
}

// Stats are counters since New, for metrics.
type Stats struct {
	// Calls is the number of getFileInfo RPCs sent to NameNodes.
	Calls int64
	// Errors counts checks that failed (not "does not exist").
	Errors int64
	// Connects counts clients created (the first connection to a file
	// system, and reconnections after a failure).
	Connects int64
}

// FS is the HDFS trigger.FileSystems. It is safe for concurrent use; make
// one per server and Close it at shutdown.
type FS struct {
	conf hadoopconf.Conf
	opts Options

	mu      sync.Mutex
	clients map[string]*conn // by file system (hdfs://authority)
	failed  map[string]failure

	calls, errs, connects atomic.Int64
}

var _ trigger.FileSystems = (*FS)(nil)

type failure struct {
	err error
	at  time.Time
}

// conn is one client and the network connection it currently uses, so a
// call that times out can be cut off.
type conn struct {
	client *hdfs.Client
	mu     sync.Mutex
	net    net.Conn
}

func (c *conn) closeNet() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.net != nil {
		c.net.Close()
	}
}

// New returns the HDFS file systems of the Hadoop configuration conf (see
// hadoopconf.Load and hadoopconf.Dir; nil means an empty configuration, so
// every hdfs:// URI must name host:port). No connection is made until the
// first check.
func New(conf hadoopconf.Conf, opts Options) *FS {
	if conf == nil {
		conf = hadoopconf.Conf{}
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.CoolDown <= 0 {
		opts.CoolDown = DefaultCoolDown
	}
	return &FS{conf: conf, opts: opts, clients: make(map[string]*conn), failed: make(map[string]failure)}
}

// DefaultFS is the configuration's fs.defaultFS (file:/// when unset): the
// file system of triggers that name none when the installation defaults
// have no CELOS_DEFAULT_HDFS.
func (f *FS) DefaultFS() string { return f.conf.DefaultFS() }

// Stats returns the counters.
func (f *FS) Stats() Stats {
	return Stats{Calls: f.calls.Load(), Errors: f.errs.Load(), Connects: f.connects.Load()}
}

// Close closes every client.
func (f *FS) Close() error {
	f.mu.Lock()
	cs := f.clients
	f.clients = make(map[string]*conn)
	f.mu.Unlock()
	var errs []error
	for _, c := range cs {
		c.closeNet()
		errs = append(errs, c.client.Close())
	}
	return errors.Join(errs...)
}

// Exists reports whether p exists (a file or a directory) on the file
// system fsURI (hdfs://namenode:8020, hdfs://nameservice; "" means
// fs.defaultFS). p may also be a full hdfs:// URI, whose authority then
// names the file system. p must be absolute.
func (f *FS) Exists(ctx context.Context, fsURI, p string) (bool, error) {
	key, p, err := f.resolve(fsURI, p)
	if err != nil {
		return false, err
	}
	ok, err := f.exists(ctx, key, p)
	if err != nil {
		f.errs.Add(1)
		return false, fmt.Errorf("hdfs %s: %w", key, err)
	}
	return ok, nil
}

// resolve returns the file system key (hdfs://authority) and the path.
func (f *FS) resolve(fsURI, p string) (string, string, error) {
	if p == "" {
		return "", "", errors.New("empty path")
	}
	if strings.Contains(p, "://") {
		u, err := url.Parse(p)
		if err != nil {
			return "", "", fmt.Errorf("path %q: %v", p, err)
		}
		if u.Scheme != "hdfs" {
			return "", "", fmt.Errorf("path %q is not on HDFS", p)
		}
		if u.Host != "" {
			fsURI = "hdfs://" + u.Host
		}
		p = u.Path
	}
	if fsURI == "" {
		fsURI = f.conf.DefaultFS()
	}
	u, err := url.Parse(fsURI)
	if err != nil {
		return "", "", fmt.Errorf("file system %q: %v", fsURI, err)
	}
	if u.Scheme != "hdfs" || u.Host == "" {
		return "", "", fmt.Errorf("file system %q is not an hdfs://host URI", fsURI)
	}
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		return "", "", fmt.Errorf("path %q is not absolute", p)
	}
	return "hdfs://" + strings.ToLower(u.Host), path.Clean(p), nil
}

func (f *FS) exists(ctx context.Context, key, p string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.CallTimeout)
	defer cancel()
	c, err := f.client(ctx, key)
	if err != nil {
		return false, err
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	f.calls.Add(1)
	go func() {
		_, err := c.client.Stat(p)
		switch {
		case err == nil:
			done <- result{ok: true}
		case errors.Is(err, fs.ErrNotExist):
			done <- result{}
		default:
			done <- result{err: err}
		}
	}()
	select {
	case r := <-done:
		if r.err != nil && !isRemote(r.err) {
			// The connection failed, not the call: start afresh next time.
			f.drop(key, c, r.err)
		}
		return r.ok, r.err
	case <-ctx.Done():
		err := fmt.Errorf("no answer from the NameNode: %w", context.Cause(ctx))
		f.drop(key, c, err)
		return false, err
	}
}

// isRemote reports whether err is an answer of the NameNode (an exception
// such as AccessControlException), so the connection is fine.
func isRemote(err error) bool {
	var remote hdfs.Error
	return errors.As(err, &remote) || errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrInvalid)
}

// drop forgets a client after a connection failure, cuts its connection
// (which ends a call stuck on it) and closes it in the background.
func (f *FS) drop(key string, c *conn, err error) {
	f.mu.Lock()
	if f.clients[key] == c {
		delete(f.clients, key)
	}
	f.failed[key] = failure{err: err, at: time.Now()}
	f.mu.Unlock()
	c.closeNet()
	go c.client.Close()
}

// client returns the kept client of a file system, connecting if needed.
func (f *FS) client(ctx context.Context, key string) (*conn, error) {
	f.mu.Lock()
	if c, ok := f.clients[key]; ok {
		f.mu.Unlock()
		return c, nil
	}
	if fl, ok := f.failed[key]; ok && time.Since(fl.at) < f.opts.CoolDown {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w (not retried for %s)", fl.err, f.opts.CoolDown)
	}
	f.mu.Unlock()

	co, err := f.conf.ClientOptions(hadoopconf.Options{
		FS: key, User: f.opts.User, DialTimeout: f.opts.DialTimeout, Keytab: f.opts.Keytab, Principal: f.opts.Principal,
	})
	if err != nil {
		return nil, err
	}
	c := &conn{}
	dial := co.NamenodeDialFunc
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	timeout := f.opts.CallTimeout
	co.NamenodeDialFunc = func(dctx context.Context, network, addr string) (net.Conn, error) {
		// colinmarc/hdfs dials with a background context: bound it by ours.
		dctx, cancel := context.WithTimeout(dctx, timeout)
		defer cancel()
		nc, err := dial(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		dc := &deadlineConn{Conn: nc, timeout: timeout}
		c.mu.Lock()
		c.net = dc
		c.mu.Unlock()
		return dc, nil
	}

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
	select {
	case r = <-done:
	case <-ctx.Done():
		c.closeNet()
		r.err = fmt.Errorf("connect: %w", context.Cause(ctx))
		go func() {
			if r := <-done; r.cl != nil {
				r.cl.Close()
			}
		}()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.err != nil {
		err := fmt.Errorf("connect to %s: %w", strings.Join(co.Addresses, ","), r.err)
		f.failed[key] = failure{err: err, at: time.Now()}
		return nil, err
	}
	f.connects.Add(1)
	if prev, ok := f.clients[key]; ok { // another check connected first
		go r.cl.Close()
		return prev, nil
	}
	c.client = r.cl
	f.clients[key] = c
	delete(f.failed, key)
	return c, nil
}

// deadlineConn bounds every read and write, so a NameNode that accepts a
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
