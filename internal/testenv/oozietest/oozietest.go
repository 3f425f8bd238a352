// Package oozietest starts a real Apache Oozie server for tests: Oozie
// 5.2.1's services and REST servlets in an embedded Jetty (our small main,
// testdata/oozie/src/main/java/celos/oozie/Main.java), with Derby as its
// database, over a Hadoop mini cluster (package hdfstest), from the jars
// scripts/test-deps.sh puts under testdata/oozie/target. Workflows made of
// control nodes and fs actions run inside the server, with no YARN.
//
// A test binary starts one Oozie and its mini cluster, lazily, through
// Shared, and Main in TestMain stops both:
//
//	func TestMain(m *testing.M) { oozietest.Main(m) }
//
//	func TestSubmit(t *testing.T) {
//		env := oozietest.Shared(t)
//		url := env.Oozie.URL() // http://127.0.0.1:PORT/oozie
//		...
//	}
//
// Tests that stop or kill Oozie start one of their own with StartT.
// SharedKerberos is a second shared Oozie, with Oozie's own Kerberos
// authentication (Options.Kerberos) and a KDC of its own.
//
// When java or the jars are missing, Start returns an error wrapping
// ErrUnavailable whose text says what to install; Shared fails the test
// with it, unless CELOS_SKIP_OOZIE=1 (or CELOS_SKIP_HDFS=1: Oozie needs
// HDFS), in which case every test that needs Oozie is skipped. With CI=true
// nothing is skipped. See docs/testing.md.
package oozietest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/jvmproc"
)

// SkipEnv is the variable that, set to 1, skips tests that need Oozie.
const SkipEnv = "CELOS_SKIP_OOZIE"

// ErrUnavailable is wrapped by Start's error when Oozie cannot be run on
// this machine (no java, jars not built).
var ErrUnavailable = errors.New("oozie test server unavailable")

// ProxyUserConf is the Hadoop configuration a mini cluster needs for an
// Oozie running as user (the JVM's OS user): Oozie acts on HDFS as the
// job's user through a proxy user, which the NameNode must allow. Pass it
// as hdfstest.Options.Conf.
func ProxyUserConf(user string) map[string]string {
	return map[string]string{
		"hadoop.proxyuser." + user + ".hosts":  "*",
		"hadoop.proxyuser." + user + ".groups": "*",
	}
}

// Options configure Start.
type Options struct {
	// HDFS is the mini cluster Oozie uses (required). It must allow the
	// current OS user as a proxy user (ProxyUserConf).
	HDFS *hdfstest.Cluster
	// Dir holds conf/ (oozie-site.xml, hadoop-conf/), data/ (Derby),
	// logs/oozie.log, oozie.json and console.log. Default: a new temp dir,
	// removed by Stop.
	Dir string
	// Conf adds oozie-site.xml properties (-D key=value).
	Conf map[string]string
	// StartTimeout bounds a start or restart (default 2m).
	StartTimeout time.Duration
	// Kerberos, when set, makes Oozie's own authentication filter ask
	// every REST request for SPNEGO (oozie.authentication.type=kerberos).
	Kerberos *Kerberos
}

// Server is a running (or stopped, restartable) Oozie. Its methods are safe
// for concurrent use.
type Server struct {
	opts    Options
	dir     string
	ownDir  bool
	url     string
	port    int
	console string // the JVM's standard output and error, across restarts

	mu      sync.Mutex
	proc    *proc // nil while stopped
	stopped bool
}

// proc is one run of the JVM.
type proc struct {
	*jvmproc.Proc
	log *os.File
}

// Paths returns the java binary and its arguments up to the main class:
// the JVM options of testdata/oozie/jvm.options (Java 17 --add-opens flags,
// a small heap, a quick-starting JIT), the class-data-sharing archive
// scripts/test-deps.sh records (if it is there and current) and the
// classpath. The error wraps
// ErrUnavailable and says what to install.
func Paths() (java string, args []string, err error) {
	return helper.Command()
}

var helper = jvmproc.Helper{
	Name: "oozie", Main: "celos.oozie.Main", Deps: "oozie-core-*.jar", What: "Oozie",
	Unavailable: ErrUnavailable, SkipEnv: SkipEnv,
}

// Start starts Oozie over opts.HDFS and returns once its REST API answers.
// The caller must Stop it. On failure the error includes the tail of the
// logs.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.HDFS == nil {
		return nil, errors.New("oozietest: Options.HDFS is required")
	}
	if _, _, err := Paths(); err != nil {
		return nil, err
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	s := &Server{opts: opts}
	var err error
	if s.dir, s.ownDir, err = jvmproc.WorkDir(opts.Dir, "celos-oozie-"); err != nil {
		return nil, err
	}
	s.console = filepath.Join(s.dir, "console.log")
	// Oozie's share lib directory: without it Oozie logs a stack trace
	// at every start (no action here needs a share lib).
	if err := opts.HDFS.Client().MkdirAll("/user/"+opts.HDFS.User()+"/share/lib", 0o755); err != nil {
		return nil, fmt.Errorf("oozietest: create the share lib directory in HDFS: %w", err)
	}
	if err := s.Restart(ctx); err != nil {
		s.cleanupDir()
		return nil, err
	}
	return s, nil
}

// Restart starts the JVM again after Shutdown or Kill, on the same port and
// directory: the Derby database, hence every job, survives. Oozie's
// recovery service then picks up the jobs that were running.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("oozietest: restart: Oozie is running")
	}
	if s.stopped {
		return errors.New("oozietest: restart: the server was stopped for good")
	}
	java, args, err := Paths()
	if err != nil {
		return err
	}
	conf := s.opts.Conf
	if k := s.opts.Kerberos; k != nil {
		if args, err = k.jvmArgs(args); err != nil {
			return err
		}
		conf = k.site(conf)
	}
	args = append(args, "-dir", s.dir, "-hadoop-conf", s.opts.HDFS.ConfDir(), "-port", fmt.Sprint(s.port))
	for k, v := range conf {
		args = append(args, "-D", k+"="+v)
	}
	log, err := os.OpenFile(s.console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	began := time.Now()
	fmt.Fprintf(log, "oozietest: starting %s\n", strings.Join(append([]string{java}, args...), " "))
	jp, err := jvmproc.Start(java, args, s.dir, log, "oozie stdout: ")
	if err != nil {
		log.Close()
		return fmt.Errorf("oozietest: %w", err)
	}
	p := &proc{Proc: jp, log: log}

	fail := func(err error) error {
		p.Kill()
		p.log.Close()
		return fmt.Errorf("oozietest: %w\n%s", err, s.logTail(40))
	}
	sctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	var info struct {
		URL  string
		Port int
	}
	if err := p.Ready(sctx, "Oozie", filepath.Join(s.dir, "oozie.json"), &info); err != nil {
		return fail(err)
	}
	s.url, s.port = info.URL, info.Port
	answers := waitAnswers
	if k := s.opts.Kerberos; k != nil {
		s.url, answers = k.url(s.port), waitNegotiate
	}
	if err := answers(sctx, s.url); err != nil {
		return fail(err)
	}
	fmt.Fprintf(log, "oozietest: Oozie at %s answers after %v\n", s.url, time.Since(began).Round(time.Millisecond))
	s.proc = p
	return nil
}

// waitAnswers asks GET /v1/admin/status until it says NORMAL.
func waitAnswers(ctx context.Context, base string) error {
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/admin/status?user.name=oozietest", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"NORMAL"`) {
				return nil
			}
			err = fmt.Errorf("GET %s/v1/admin/status: %s %s", base, resp.Status, b)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("Oozie does not answer: %v (%w)", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URL is Oozie's base URL, http://127.0.0.1:PORT/oozie (under Kerberos,
// http://<host of the HTTP principal>:PORT/oozie). It stays the same across
// restarts.
func (s *Server) URL() string { return s.url }

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

// LogPath is Oozie's own log (logs/oozie.log: Oozie at INFO, the rest at
// WARN).
func (s *Server) LogPath() string { return filepath.Join(s.dir, "logs", "oozie.log") }

// ConsolePath is the JVM's standard output and error, with the helper's
// notes (command line, start-up time), across restarts.
func (s *Server) ConsolePath() string { return s.console }

// HDFS is the mini cluster this Oozie uses.
func (s *Server) HDFS() *hdfstest.Cluster { return s.opts.HDFS }

// PID is the JVM's process id, 0 while stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Kill kills the JVM with SIGKILL (a crash: no shutdown of Oozie's
// services) and waits for it to exit. Restart brings it back.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
		p.log.Close()
	}
}

// Shutdown stops Oozie cleanly (its services, then the JVM), keeping its
// directory for Restart; SIGKILL after 20 s.
func (s *Server) Shutdown() error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	defer p.log.Close()
	// EOF on its stdin: the JVM stops Oozie and exits.
	killed, err := p.Shutdown(20 * time.Second)
	if killed {
		return errors.New("oozietest: Oozie did not stop within 20 s of EOF on its stdin; killed")
	}
	if err != nil {
		return fmt.Errorf("oozietest: Oozie exited: %v", err)
	}
	return nil
}

// Stop shuts Oozie down and removes its directory if Start made it (unless
// CELOS_KEEP_TESTENV=1). It is safe to call more than once. The mini
// cluster is the caller's.
func (s *Server) Stop() error {
	err := s.Shutdown()
	s.mu.Lock()
	first := !s.stopped
	s.stopped = true
	s.mu.Unlock()
	if first {
		s.cleanupDir()
	}
	return err
}

func (s *Server) cleanupDir() {
	jvmproc.RemoveWorkDir(s.dir, s.ownDir)
}

// LogTail returns the last n lines of Oozie's log and of the JVM's console,
// each under a header naming the file.
func (s *Server) LogTail(n int) string { return s.logTail(n) }

func (s *Server) logTail(n int) string {
	var b strings.Builder
	for _, p := range []string{s.LogPath(), s.console} {
		fmt.Fprintf(&b, "--- last lines of %s ---\n%s\n", p, jvmproc.Tail(p, n))
	}
	return b.String()
}
