// Package hdfstest starts a real HDFS for tests: Apache Hadoop's
// MiniDFSCluster (one NameNode, one or more DataNodes) in a JVM on loopback
// ports, from the jars scripts/test-deps.sh puts under
// testdata/minicluster/target. A test binary starts it once, usually lazily
// through Shared and stopped by Main in TestMain:
//
//	func TestMain(m *testing.M) { hdfstest.Main(m) }
//
//	func TestUpload(t *testing.T) {
//		c := hdfstest.Shared(t)
//		fs := c.Client()
//		...
//	}
//
// Tests that take the NameNode down start a cluster of their own with Start
// (about 4 s), so the shared one stays healthy for the others.
//
// WebHDFS is on: HTTPAddr is the NameNode's HTTP address
// (http://HTTPAddr/webhdfs/v1/...).
//
// When java or the jars are missing, Start returns an error wrapping
// ErrUnavailable whose text says what to install; Shared fails the test with
// it, unless CELOS_SKIP_HDFS=1, in which case every test that needs HDFS is
// skipped. See docs/testing.md.
package hdfstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/celos-go/celos/internal/testenv/jvmproc"
)

// SkipEnv is the variable that, set to 1, skips tests that need HDFS.
const SkipEnv = "CELOS_SKIP_HDFS"

// ErrUnavailable is wrapped by Start's error when the mini cluster cannot
// be run on this machine (no java, jars not built).
var ErrUnavailable = errors.New("hadoop mini cluster unavailable")

// Options configure Start. The zero value is one DataNode, a fresh temp
// dir, the current OS user and a 2-minute start-up limit.
type Options struct {
	// DataNodes is the number of DataNodes (default 1; replication is
	// min(3, DataNodes)).
	DataNodes int
	// Dir holds the cluster's conf/, dfs/ (data), cluster.json and
	// minicluster.log. Default: a new temp dir, removed by Stop.
	Dir string
	// User is the HDFS user of Client (default: the current OS user, who
	// is the cluster's superuser since the JVM runs as that user).
	User string
	// Conf adds Hadoop configuration (-D key=value) to the cluster.
	Conf map[string]string
	// StartTimeout bounds start-up and NameNode restarts (default 2m).
	StartTimeout time.Duration
}

// Cluster is a running mini cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	addr, httpAddr string
	dir, confDir   string
	logPath        string
	user           string
	ownDir         bool
	timeout        time.Duration

	proc *jvmproc.Proc

	ctlMu sync.Mutex // one control command at a time

	mu       sync.Mutex
	client   *hdfs.Client
	stopped  bool
	logFile  *os.File
	stopOnce sync.Once
}

// Paths returns the java binary and its arguments up to the main class:
// the JVM options of testdata/minicluster/jvm.options (Hadoop's Java 17
// --add-opens flags of HADOOP-19310, a small heap, a quick-starting JIT),
// the class-data-sharing archive scripts/test-deps.sh records (if it is
// there and current) and the classpath. The error wraps ErrUnavailable and
// says what to install. CELOS_MINICLUSTER_DIR overrides
// testdata/minicluster/target.
func Paths() (java string, args []string, err error) {
	return helper.Command()
}

var helper = jvmproc.Helper{
	Name: "minicluster", DirEnv: "CELOS_MINICLUSTER_DIR", Main: "celos.minicluster.Main",
	Deps: "hadoop-client-minicluster-*.jar", What: "Hadoop",
	Unavailable: ErrUnavailable, SkipEnv: SkipEnv,
}

// Start starts a mini cluster and returns once it accepts writes. The caller
// must Stop it. On failure the error includes the tail of the cluster's log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	java, args, err := Paths()
	if err != nil {
		return nil, err
	}
	if opts.DataNodes <= 0 {
		opts.DataNodes = 1
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("hdfstest: current user: %w", err)
		}
		opts.User = u.Username
	}
	c := &Cluster{user: opts.User, timeout: opts.StartTimeout}
	if c.dir, c.ownDir, err = jvmproc.WorkDir(opts.Dir, "celos-hdfs-"); err != nil {
		return nil, err
	}
	c.confDir = filepath.Join(c.dir, "conf")
	c.logPath = filepath.Join(c.dir, "minicluster.log")
	if c.logFile, err = os.Create(c.logPath); err != nil {
		c.cleanupDir()
		return nil, err
	}

	args = append(args, "-dir", c.dir, "-format", "-datanodes", fmt.Sprint(opts.DataNodes))
	for k, v := range opts.Conf {
		args = append(args, "-D", k+"="+v)
	}
	began := time.Now()
	if c.proc, err = jvmproc.Start(java, args, c.dir, c.logFile, "minicluster stdout: "); err != nil {
		c.logFile.Close()
		c.cleanupDir()
		return nil, fmt.Errorf("hdfstest: %w", err)
	}

	fail := func(err error) (*Cluster, error) {
		c.Kill()
		tail := c.LogTail(40)
		c.Stop()
		return nil, fmt.Errorf("hdfstest: %w\n--- last lines of %s ---\n%s", err, c.logPath, tail)
	}
	sctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	var info struct{ Namenode, HTTP string }
	if err := c.proc.Ready(sctx, "mini cluster", filepath.Join(c.dir, "cluster.json"), &info); err != nil {
		return fail(err)
	}
	c.addr, c.httpAddr = info.Namenode, info.HTTP
	if c.client, err = c.NewClient(c.user); err != nil {
		return fail(err)
	}
	if err := c.waitWritable(sctx); err != nil {
		return fail(err)
	}
	fmt.Fprintf(c.logFile, "hdfstest: cluster at %s accepts writes after %v\n", c.addr, time.Since(began).Round(time.Millisecond))
	return c, nil
}

// waitWritable creates and removes a probe file until that works.
func (c *Cluster) waitWritable(ctx context.Context) error {
	var last error
	for {
		last = c.probe()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mini cluster does not accept writes: %v (%w)", last, ctx.Err())
		case <-c.proc.Exited():
			return c.proc.ExitError()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) probe() error {
	const p = "/.hdfstest-probe"
	_ = c.client.Remove(p)
	w, err := c.client.Create(p)
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte("ok")); err != nil {
		w.Close()
		return err
	}
	if err := closeReplicated(w); err != nil {
		return err
	}
	return c.client.Remove(p)
}

// Addr is the NameNode RPC address, "127.0.0.1:port".
func (c *Cluster) Addr() string { return c.addr }

// URL is "hdfs://127.0.0.1:port" followed by p (which should start with /).
func (c *Cluster) URL(p string) string { return "hdfs://" + c.addr + p }

// HTTPAddr is the NameNode HTTP address, where WebHDFS answers.
func (c *Cluster) HTTPAddr() string { return c.httpAddr }

// ConfDir holds core-site.xml (fs.defaultFS) and hdfs-site.xml
// (dfs.namenode.rpc-address, http-address, replication, blocksize): point
// HADOOP_CONF_DIR or hadoopconf.Load at it.
func (c *Cluster) ConfDir() string { return c.confDir }

// Dir is the cluster's working directory (conf/, dfs/, the log).
func (c *Cluster) Dir() string { return c.dir }

// LogPath is the JVM's log file.
func (c *Cluster) LogPath() string { return c.logPath }

// User is the user of Client: the cluster's superuser.
func (c *Cluster) User() string { return c.user }

// PID is the JVM's process id.
func (c *Cluster) PID() int { return c.proc.PID() }

// Client is a client connected as User. It is shared: do not Close it (Stop
// does). After a NameNode restart it refuses calls for 5 s (colinmarc/hdfs
// backs off a failed NameNode); use NewClient for a fresh one.
func (c *Cluster) Client() *hdfs.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.client
}

// NewClient returns a new client acting as user (HDFS trusts the name under
// simple authentication). The caller closes it.
func (c *Cluster) NewClient(user string) (*hdfs.Client, error) {
	return hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{c.addr}, User: user})
}

// StopNameNode shuts the NameNode down; the DataNodes keep running and the
// RPC port refuses connections until StartNameNode.
func (c *Cluster) StopNameNode(ctx context.Context) error { return c.control(ctx, "stop-namenode") }

// StartNameNode starts the NameNode again on the same port, with the same
// data, and returns when it has left safe mode.
func (c *Cluster) StartNameNode(ctx context.Context) error {
	return c.control(ctx, "start-namenode")
}

// StopDataNode shuts DataNode i down (0-based).
func (c *Cluster) StopDataNode(ctx context.Context, i int) error {
	return c.control(ctx, fmt.Sprintf("stop-datanode %d", i))
}

// StartDataNode starts the most recently stopped DataNode again.
func (c *Cluster) StartDataNode(ctx context.Context) error {
	return c.control(ctx, "start-datanode")
}

func (c *Cluster) control(ctx context.Context, cmd string) error {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.proc.Send(cmd); err != nil {
		return fmt.Errorf("hdfstest: %s: %w", cmd, err)
	}
	line, err := c.proc.Reply(ctx)
	if err != nil {
		return fmt.Errorf("hdfstest: %s: %w\n--- last lines of %s ---\n%s", cmd, err, c.logPath, c.LogTail(30))
	}
	name := strings.Fields(cmd)[0]
	if line != "OK "+name {
		return fmt.Errorf("hdfstest: %s: %s\n--- last lines of %s ---\n%s", cmd, line, c.logPath, c.LogTail(30))
	}
	return nil
}

// Freeze stops the JVM (NameNode and DataNodes at once) with SIGSTOP: its
// ports still accept connections and the kernel still acknowledges what
// is sent, but nothing answers, as with a NameNode stuck in a long garbage
// collection. Thaw resumes it; Stop thaws a frozen cluster first.
func (c *Cluster) Freeze() error { return c.signal(syscall.SIGSTOP) }

// Thaw resumes a JVM stopped by Freeze.
func (c *Cluster) Thaw() error { return c.signal(syscall.SIGCONT) }

func (c *Cluster) signal(sig syscall.Signal) error {
	if c.proc == nil {
		return errors.New("hdfstest: no JVM")
	}
	if err := c.proc.Signal(sig); err != nil {
		return fmt.Errorf("hdfstest: %v: %w", sig, err)
	}
	return nil
}

// Kill kills the JVM (NameNode and DataNodes at once) with SIGKILL and waits
// for it to exit. Stop is still needed to remove the directory.
func (c *Cluster) Kill() error {
	if c.proc != nil {
		c.proc.Kill()
	}
	return nil
}

// Stop shuts the cluster down (politely, then SIGKILL after 10 s), closes
// the shared client and removes the directory if Start made it. It is safe
// to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		if c.client != nil {
			c.client.Close()
			c.client = nil
		}
		c.mu.Unlock()
		if c.proc != nil {
			// Thawed if frozen; EOF on its stdin shuts the cluster down.
			_, _ = c.proc.Shutdown(10 * time.Second)
		}
		if c.logFile != nil {
			c.logFile.Close()
		}
		c.cleanupDir()
	})
	return nil
}

func (c *Cluster) cleanupDir() {
	jvmproc.RemoveWorkDir(c.dir, c.ownDir)
}

// LogTail returns the last n lines of the cluster's log.
func (c *Cluster) LogTail(n int) string {
	return jvmproc.Tail(c.logPath, n)
}
