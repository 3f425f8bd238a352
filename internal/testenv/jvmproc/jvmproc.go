// Package jvmproc runs the helper JVMs of the test environment: the Hadoop
// mini cluster of package hdfstest and the Oozie server of package
// oozietest. It finds java (on PATH) and the jars scripts/test-deps.sh
// builds with Maven under testdata/NAME/target, starts the JVM in a process
// group of its own, hands on the READY, OK and ERR lines it answers with on
// its standard output, and stops it: EOF on its standard input, then
// SIGKILL to the whole group. It knows nothing of what the JVM does; the
// packages that use it keep their own options, errors and skip rules.
package jvmproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/celos-go/celos/internal/testenv"
)

// Helper describes one helper JVM built by scripts/test-deps.sh.
type Helper struct {
	// Name is its directory under testdata ("minicluster", "oozie"), which
	// holds jvm.options and target/, where Maven puts the helper's own jar
	// Name.jar and scripts/test-deps.sh its class-data-sharing archive
	// Name.jsa (used unless it is older than the jar).
	Name string
	// DirEnv, if set, names a variable that overrides testdata/Name/target.
	DirEnv string
	// Deps is a glob in target/dependency that must match at least one jar
	// ("hadoop-client-minicluster-*.jar"); What names them in the error
	// ("Hadoop").
	Deps, What string
	// Main is the main class.
	Main string
	// Unavailable is wrapped by Command's errors; SkipEnv is the variable
	// they tell the user to set to skip the tests instead.
	Unavailable error
	SkipEnv     string
}

// Command returns the java binary and its arguments up to the main class:
// the JVM options of testdata/Name/jvm.options, the class-data-sharing
// archive (if it is there and current) and the classpath. The error wraps
// h.Unavailable and says what to install or run (`make deps`).
func (h Helper) Command() (java string, args []string, err error) {
	java, err = exec.LookPath("java")
	if err != nil {
		return "", nil, fmt.Errorf("%w: java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless) and run `make deps`, or set %s=1", h.Unavailable, h.SkipEnv)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", h.Unavailable, err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r // the archive records the physical classpath (pwd -P)
	}
	home := filepath.Join(root, "testdata", h.Name)
	target := ""
	if h.DirEnv != "" {
		target = os.Getenv(h.DirEnv)
	}
	if target == "" {
		target = filepath.Join(home, "target")
	}
	jar := filepath.Join(target, h.Name+".jar")
	jarInfo, err := os.Stat(jar)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s missing: run `make deps` (scripts/test-deps.sh builds it with Maven), or set %s=1", h.Unavailable, jar, h.SkipEnv)
	}
	deps, _ := filepath.Glob(filepath.Join(target, "dependency", h.Deps))
	if len(deps) == 0 {
		return "", nil, fmt.Errorf("%w: no %s jars in %s: run `make deps`, or set %s=1", h.Unavailable, h.What, filepath.Join(target, "dependency"), h.SkipEnv)
	}
	args = []string{"@" + filepath.Join(home, "jvm.options")}
	// An archive older than the jar is stale; the JVM would also refuse
	// one recorded for another classpath, with a warning in its log.
	archive := filepath.Join(target, h.Name+".jsa")
	if jsa, err := os.Stat(archive); err == nil && !jsa.ModTime().Before(jarInfo.ModTime()) {
		args = append(args, "-XX:SharedArchiveFile="+archive)
	}
	cp := jar + string(os.PathListSeparator) + filepath.Join(target, "dependency", "*")
	return java, append(args, "-cp", cp, h.Main), nil
}

// Proc is one run of a helper JVM.
type Proc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan string
	exited  chan struct{} // closed when the JVM has exited
	waitErr error         // valid after exited is closed
}

// Start starts java with args in dir. The JVM's standard error goes to log,
// and so does each line of its standard output, after stdoutPrefix; the
// lines starting with "READY ", "OK " or "ERR " are the replies Reply
// returns (up to 16 unread; later ones are only logged). The JVM runs in a
// process group of its own, so Kill reaches whatever it forks, and is
// killed if the test binary dies (the helpers also exit on EOF on their
// standard input).
func Start(java string, args []string, dir string, log *os.File, stdoutPrefix string) (*Proc, error) {
	p := &Proc{cmd: exec.Command(java, args...), replies: make(chan string, 16), exited: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Stderr = log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start java: %w", err)
	}
	// An os.Pipe rather than StdoutPipe: Wait must not close it before the
	// last reply (an "ERR start" just before exiting) has been read.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		p.stdin.Close()
		return nil, fmt.Errorf("start java: %w", err)
	}
	p.cmd.Stdout = stdoutW
	err = p.cmd.Start()
	stdoutW.Close()
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("start java: %w", err)
	}
	drained := make(chan struct{})
	go func() { p.readStdout(stdout, log, stdoutPrefix); stdout.Close(); close(drained) }()
	go func() {
		p.waitErr = p.cmd.Wait()
		select { // replies printed before exiting are read first
		case <-drained:
		case <-time.After(2 * time.Second):
		}
		close(p.exited)
	}()
	return p, nil
}

func (p *Proc) readStdout(r io.Reader, log io.Writer, prefix string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintf(log, "%s%s\n", prefix, line)
		if strings.HasPrefix(line, "READY ") || strings.HasPrefix(line, "OK ") || strings.HasPrefix(line, "ERR ") {
			select {
			case p.replies <- line:
			default:
			}
		}
	}
}

// Reply waits for the JVM's next reply line. If the JVM exits first the
// error says "java exited" and how.
func (p *Proc) Reply(ctx context.Context) (string, error) {
	select {
	case line := <-p.replies:
		return line, nil
	case <-p.exited:
		select { // a reply printed just before exiting
		case line := <-p.replies:
			return line, nil
		default:
		}
		return "", p.exitError()
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Ready waits for the JVM's READY reply, then reads the JSON file at path
// in which it recorded where it listens into info. name names the helper
// in the errors ("mini cluster did not start: ...").
func (p *Proc) Ready(ctx context.Context, name, path string, info any) error {
	line, err := p.Reply(ctx)
	if err != nil {
		return fmt.Errorf("%s did not start: %w", name, err)
	}
	if !strings.HasPrefix(line, "READY ") {
		return fmt.Errorf("%s said %q, want READY", name, line)
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, info)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// Send writes line and a newline to the JVM's standard input.
func (p *Proc) Send(line string) error {
	_, err := io.WriteString(p.stdin, line+"\n")
	return err
}

// Exited is closed when the JVM has exited; ExitError then says how.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ExitError is "java exited: " and the JVM's exit status; valid once
// Exited is closed.
func (p *Proc) ExitError() error { return p.exitError() }

func (p *Proc) exitError() error { return fmt.Errorf("java exited: %v", p.waitErr) }

// PID is the JVM's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the JVM's process group.
func (p *Proc) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Kill kills the JVM's process group with SIGKILL and waits for the JVM to
// exit.
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Shutdown resumes the process group (a JVM stopped by SIGSTOP cannot shut
// down), closes the JVM's standard input, on which EOF the helpers stop
// their services and exit, and waits up to grace for it; then it kills the
// group. It returns whether it had to kill, and otherwise the JVM's exit
// status (nil for a clean exit).
func (p *Proc) Shutdown(grace time.Duration) (killed bool, err error) {
	_ = p.Signal(syscall.SIGCONT)
	p.stdin.Close()
	select {
	case <-p.exited:
		return false, p.waitErr
	case <-time.After(grace):
		p.Kill()
		return true, nil
	}
}

// WorkDir returns dir, made if need be, or if dir is "" a new temporary
// directory named after pattern (see os.MkdirTemp); own says which, for
// RemoveWorkDir.
func WorkDir(dir, pattern string) (path string, own bool, err error) {
	if dir == "" {
		dir, err = os.MkdirTemp("", pattern)
		return dir, err == nil, err
	}
	return dir, false, os.MkdirAll(dir, 0o755)
}

// RemoveWorkDir removes dir if WorkDir made it (own), unless
// CELOS_KEEP_TESTENV=1 asks to keep it for a post-mortem.
func RemoveWorkDir(dir string, own bool) {
	if own && os.Getenv("CELOS_KEEP_TESTENV") != "1" {
		os.RemoveAll(dir)
	}
}

// Tail returns the last n lines of the file at path, or the error reading
// it.
func Tail(path string, n int) string {
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
