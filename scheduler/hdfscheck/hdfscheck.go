// Package hdfscheck answers the hdfsCheck trigger's question, "does this
// path exist?", on HDFS: it implements trigger.FileSystems for hdfs:// file
// systems over the HDFS client of targets (targets.HDFSPool: one
// long-lived client per file system, NameNode or HA name service, built
// from the installation's Hadoop configuration), and keeps what is the
// scheduler's own: the trigger's URIs, its error count and its metrics.
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
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// Defaults of Options.
const (
	DefaultCallTimeout = targets.DefaultHDFSCallTimeout
	DefaultCoolDown    = targets.DefaultHDFSCoolDown
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
	// Calls is the number of operations sent to NameNodes (existence
	// checks, and listings of dataVolume triggers).
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
	pool *targets.HDFSPool
	errs atomic.Int64
}

var (
	_ trigger.FileSystems = (*FS)(nil)
	_ trigger.Lister      = (*FS)(nil)
)

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
	pool := targets.NewHDFSPool(conf, targets.HDFSOptions{
		Client:      hadoopconf.Options{User: opts.User, DialTimeout: opts.DialTimeout, Keytab: opts.Keytab, Principal: opts.Principal},
		CallTimeout: opts.CallTimeout,
		CoolDown:    opts.CoolDown,
	})
	return &FS{conf: conf, pool: pool}
}

// DefaultFS is the configuration's fs.defaultFS (file:/// when unset): the
// file system of triggers that name none when the installation defaults
// have no CELOS_DEFAULT_HDFS.
func (f *FS) DefaultFS() (string, error) { return f.conf.DefaultFS() }

// Stats returns the counters.
func (f *FS) Stats() Stats {
	st := f.pool.Stats()
	return Stats{Calls: st.Calls, Errors: f.errs.Load(), Connects: st.Connects}
}

// Close closes every client.
func (f *FS) Close() error { return f.pool.Close() }

// Exists reports whether p exists (a file or a directory) on the file
// system fsURI (hdfs://namenode:8020, hdfs://nameservice; "" means
// fs.defaultFS). p may also be a full hdfs:// URI, whose authority then
// names the file system. p must be absolute.
func (f *FS) Exists(ctx context.Context, fsURI, p string) (bool, error) {
	key, p, err := f.resolve(fsURI, p)
	if err != nil {
		return false, err
	}
	h, err := f.pool.FS(key)
	if err != nil {
		return false, err
	}
	ok, err := h.Exists(ctx, p)
	if err != nil {
		f.errs.Add(1)
		return false, fmt.Errorf("hdfs %s: %w", key, err)
	}
	return ok, nil
}

// List lists directory dir (absolute, or a full hdfs:// URI) of the file
// system fsURI for dataVolume triggers: one getListing call (paged by the
// NameNode for directories of more than its dfs.ls.limit entries). A
// missing directory lists as empty.
func (f *FS) List(ctx context.Context, fsURI, dir string) ([]trigger.Entry, error) {
	key, p, err := f.resolve(fsURI, dir)
	if err != nil {
		return nil, err
	}
	h, err := f.pool.FS(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	infos, err := h.ReadDir(p)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, nil
	case err != nil:
		f.errs.Add(1)
		return nil, fmt.Errorf("hdfs %s: %w", key, err)
	}
	return trigger.Entries(infos), nil
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
		var err error
		if fsURI, err = f.conf.DefaultFS(); err != nil {
			return "", "", err
		}
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
