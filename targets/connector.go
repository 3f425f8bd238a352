package targets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/celos-go/celos/targets/hadoopconf"
)

// Connector opens the file systems locations name and keeps one
// connection per server (user, host and port) until Close.
type Connector struct {
	// SSH configures sftp: connections.
	SSH SSHOptions
	// HDFS configures HDFS connections (user, dial timeout, Kerberos).
	HDFS hadoopconf.Options
	// HDFSCallTimeout bounds each HDFS operation (default
	// DefaultHDFSCallTimeout): see HDFSOptions.CallTimeout.
	HDFSCallTimeout time.Duration
	// SFTPTimeout is how long an SFTP request may wait without any
	// answer from the server before the connection is closed (default
	// DefaultSFTPTimeout): an sftp-server stuck on a hung mount answers
	// no request, while the SSH connection answers keep-alives.
	SFTPTimeout time.Duration
	// Wrap, if set, wraps every file system opened (tests inject faults
	// with it).
	Wrap func(FS) FS

	mu   sync.Mutex
	ssh  []*ssh.Client
	open map[string]FS
}

// NewConnector returns a Connector with the given options.
func NewConnector(sshOpts SSHOptions, hdfsOpts hadoopconf.Options) *Connector {
	return &Connector{SSH: sshOpts, HDFS: hdfsOpts, open: map[string]FS{}}
}

// Open returns the file system of l (a file: or sftp: location).
func (c *Connector) Open(ctx context.Context, l Location) (FS, error) {
	key := l.Server()
	c.mu.Lock()
	defer c.mu.Unlock()
	if fsys, ok := c.open[key]; ok {
		return fsys, nil
	}
	var fsys FS
	switch l.Scheme {
	case "file":
		fsys = Local{}
	case "sftp":
		port := l.Port
		if port == "" {
			port = DefaultSSHPort
		}
		user := l.User
		if user == "" {
			user = currentUser()
		}
		conn, err := DialSSH(ctx, net.JoinHostPort(l.Host, port), user, c.SSH)
		if err != nil {
			return nil, err
		}
		s, err := NewSFTP(key, conn, c.SFTPTimeout)
		if err != nil {
			conn.Close()
			return nil, err
		}
		c.ssh = append(c.ssh, conn)
		fsys = s
	default:
		return nil, fmt.Errorf("%s: cannot open a %s: location here", l, l.Scheme)
	}
	if c.Wrap != nil {
		fsys = c.Wrap(fsys)
	}
	c.open[key] = fsys
	return fsys, nil
}

// OpenHDFS returns the file system Hadoop configuration conf names. When
// fs.defaultFS is file:/// (Hadoop's convention for "no cluster"), the
// "HDFS" side is the local disk of the installation: the file system of
// installation, the location of its workflows directory (the local disk
// for a file: URL, the server's disk over SFTP for an sftp: URL).
// Otherwise it connects to the cluster and checks that the NameNode
// answers within the HDFS dial timeout; every later operation on it has
// the HDFSCallTimeout deadline.
func (c *Connector) OpenHDFS(ctx context.Context, conf hadoopconf.Conf, installation Location) (FS, string, error) {
	if conf.IsLocal("") {
		fsys, err := c.Open(ctx, installation)
		return fsys, installation.Server(), err
	}
	def, err := conf.DefaultFS()
	if err != nil {
		return nil, "", err
	}
	uri := strings.TrimSuffix(def, "/")
	c.mu.Lock()
	if fsys, ok := c.open[uri]; ok {
		c.mu.Unlock()
		return fsys, uri, nil
	}
	c.mu.Unlock()
	pool := NewHDFSPool(conf, HDFSOptions{Client: c.HDFS, CallTimeout: c.HDFSCallTimeout})
	h, err := pool.FS(uri)
	if err != nil {
		return nil, uri, err
	}
	timeout := c.HDFS.DialTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := h.Ping(pctx); err != nil {
		h.Close()
		var ce *hdfsConnectError
		if errors.As(err, &ce) {
			return nil, uri, fmt.Errorf("connect to HDFS %s: %w", ce.addrs, ce.err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", timeout)
		}
		return nil, uri, fmt.Errorf("HDFS %s: NameNode not reachable: %w", uri, err)
	}
	var fsys FS = h
	if c.Wrap != nil {
		fsys = c.Wrap(fsys)
	}
	c.mu.Lock()
	c.open[uri] = fsys
	c.mu.Unlock()
	return fsys, uri, nil
}

// Close closes every file system and connection opened.
func (c *Connector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for k, fsys := range c.open {
		if err := fsys.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
		delete(c.open, k)
	}
	for _, s := range c.ssh {
		s.Close()
	}
	c.ssh = nil
	return errors.Join(errs...)
}
