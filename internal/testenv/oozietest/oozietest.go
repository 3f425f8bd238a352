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
//
// When java or the jars are missing, Start returns an error wrapping
// ErrUnavailable whose text says what to install; Shared fails the test
// with it, unless CELOS_SKIP_OOZIE=1 (or CELOS_SKIP_HDFS=1: Oozie needs
// HDFS), in which case every test that needs Oozie is skipped. With CI=true
// nothing is skipped. See docs/testing.md.
package oozietest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/celos-go/celos/internal/testenv"
	"github.com/celos-go/celos/internal/testenv/hdfstest"
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
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan string
	exited  chan struct{} // closed when the JVM has exited
	waitErr error         // valid after exited is closed
	log     *os.File
}

// Paths returns the java binary and its arguments up to the main class:
// the JVM options of testdata/oozie/jvm.options (Java 17 --add-opens flags,
// a small heap, a quick-starting JIT), the class-data-sharing archive
// scripts/test-deps.sh records (if it is there and current) and the
// classpath. The error wraps
// ErrUnavailable and says what to install.
func Paths() (java string, args []string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", nil, fmt.Errorf("%w: java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless) and run `make deps`, or set %s=1", ErrUnavailable, SkipEnv)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r // the archive records the physical classpath (pwd -P)
	}
	od := filepath.Join(root, "testdata", "oozie")
	target := filepath.Join(od, "target")
	jar := filepath.Join(target, "oozie.jar")
	jarInfo, err := os.Stat(jar)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s missing: run `make deps` (scripts/test-deps.sh builds it with Maven), or set %s=1", ErrUnavailable, jar, SkipEnv)
	}
	deps, _ := filepath.Glob(filepath.Join(target, "dependency", "oozie-core-*.jar"))
	if len(deps) == 0 {
		return "", nil, fmt.Errorf("%w: no Oozie jars in %s: run `make deps`, or set %s=1", ErrUnavailable, filepath.Join(target, "dependency"), SkipEnv)
	}
	args = []string{"@" + filepath.Join(od, "jvm.options")}
	// The class-data-sharing archive scripts/test-deps.sh records, unless
	// it is older than the jar (the JVM would also refuse one recorded for
	// another classpath, with a warning on the console).
	if jsa, err := os.Stat(filepath.Join(target, "oozie.jsa")); err == nil && !jsa.ModTime().Before(jarInfo.ModTime()) {
		args = append(args, "-XX:SharedArchiveFile="+filepath.Join(target, "oozie.jsa"))
	}
	cp := jar + string(os.PathListSeparator) + filepath.Join(target, "dependency", "*")
	return java, append(args, "-cp", cp, "celos.oozie.Main"), nil
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
	s := &Server{opts: opts, dir: opts.Dir}
	if s.dir == "" {
		var err error
		if s.dir, err = os.MkdirTemp("", "celos-oozie-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
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
	args = append(args, "-dir", s.dir, "-hadoop-conf", s.opts.HDFS.ConfDir(), "-port", fmt.Sprint(s.port))
	for k, v := range s.opts.Conf {
		args = append(args, "-D", k+"="+v)
	}
	log, err := os.OpenFile(s.console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p := &proc{cmd: exec.Command(java, args...), replies: make(chan string, 16), exited: make(chan struct{}), log: log}
	p.cmd.Dir = s.dir
	p.cmd.Stderr = log
	// Its own process group, so Kill takes everything; killed with us if
	// the test binary dies (and the JVM also exits on EOF on its stdin).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		log.Close()
		return err
	}
	// An os.Pipe rather than StdoutPipe: Wait must not close it before the
	// last reply has been read.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		log.Close()
		return err
	}
	p.cmd.Stdout = stdoutW
	began := time.Now()
	fmt.Fprintf(log, "oozietest: starting %s\n", strings.Join(p.cmd.Args, " "))
	err = p.cmd.Start()
	stdoutW.Close()
	if err != nil {
		stdout.Close()
		log.Close()
		return fmt.Errorf("oozietest: start java: %w", err)
	}
	drained := make(chan struct{})
	go func() { p.readStdout(stdout); stdout.Close(); close(drained) }()
	go func() {
		p.waitErr = p.cmd.Wait()
		select { // replies printed before exiting are read first
		case <-drained:
		case <-time.After(2 * time.Second):
		}
		close(p.exited)
	}()

	fail := func(err error) error {
		p.kill()
		p.log.Close()
		return fmt.Errorf("oozietest: %w\n%s", err, s.logTail(40))
	}
	sctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	line, err := p.reply(sctx)
	if err != nil {
		return fail(fmt.Errorf("Oozie did not start: %w", err))
	}
	if !strings.HasPrefix(line, "READY ") {
		return fail(fmt.Errorf("Oozie said %q, want READY", line))
	}
	var info struct {
		URL  string
		Port int
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "oozie.json"))
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err != nil {
		return fail(fmt.Errorf("oozie.json: %w", err))
	}
	s.url, s.port = info.URL, info.Port
	if err := waitAnswers(sctx, s.url); err != nil {
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

func (p *proc) readStdout(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintf(p.log, "oozie stdout: %s\n", line)
		if strings.HasPrefix(line, "READY ") || strings.HasPrefix(line, "OK ") || strings.HasPrefix(line, "ERR ") {
			select {
			case p.replies <- line:
			default:
			}
		}
	}
}

func (p *proc) reply(ctx context.Context) (string, error) {
	select {
	case line := <-p.replies:
		return line, nil
	case <-p.exited:
		select {
		case line := <-p.replies:
			return line, nil
		default:
		}
		return "", fmt.Errorf("java exited: %v", p.waitErr)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// URL is Oozie's base URL, http://127.0.0.1:PORT/oozie. It stays the same
// across restarts.
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
	return s.proc.cmd.Process.Pid
}

// Kill kills the JVM with SIGKILL (a crash: no shutdown of Oozie's
// services) and waits for it to exit. Restart brings it back.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.kill()
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
	p.stdin.Close() // EOF: the JVM stops Oozie and exits
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.kill()
		return errors.New("oozietest: Oozie did not stop within 20 s of EOF on its stdin; killed")
	}
	if p.waitErr != nil {
		return fmt.Errorf("oozietest: Oozie exited: %v", p.waitErr)
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
	if s.ownDir && os.Getenv("CELOS_KEEP_TESTENV") != "1" {
		os.RemoveAll(s.dir)
	}
}

// LogTail returns the last n lines of Oozie's log and of the JVM's console,
// each under a header naming the file.
func (s *Server) LogTail(n int) string { return s.logTail(n) }

func (s *Server) logTail(n int) string {
	var b strings.Builder
	for _, p := range []string{s.LogPath(), s.console} {
		fmt.Fprintf(&b, "--- last lines of %s ---\n%s\n", p, tail(p, n))
	}
	return b.String()
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
