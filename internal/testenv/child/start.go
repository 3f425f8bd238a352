package child

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// Is reports whether this process is the child of Start (or Run) running
// t's body: the test then skips its parent's set-up and calls Start.
func Is(t *testing.T) bool { return os.Getenv(env) == t.Name() }

// Process is a test body running in a child process, started by Start,
// for a test that kills it in the middle (kill -9) and checks what it
// left.
type Process struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// Start runs body in a child process (this test binary, running only the
// calling test, with the parent's environment) whose address space is
// limited to memLimit bytes, and returns at once; the caller waits for
// what the body does (a file it writes) and ends it with Kill or Wait. In
// the child (Is), Start runs body itself, fails the test if it returns an
// error, and returns nil.
func Start(t *testing.T, memLimit uint64, body func() error) *Process {
	t.Helper()
	if Is(t) {
		lim := &syscall.Rlimit{Cur: memLimit, Max: memLimit}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
			t.Fatal(err)
		}
		if err := body(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(done + "\n")
		return nil
	}
	p := &Process{done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	p.cmd.Env = append(os.Environ(), env+"="+t.Name())
	p.cmd.Stdout = (*locked)(p)
	p.cmd.Stderr = (*locked)(p)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start the child: %v", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	return p
}

// Kill ends the child with SIGKILL (no clean-up of any kind runs in it)
// and waits for it to be gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Exited reports whether the child has ended, and its error then.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Output is what the child printed so far (the tail of it).
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return lastLines(p.out.String(), 20)
}

// locked is the Process as a writer for the child's output.
type locked Process

func (l *locked) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(b)
}
