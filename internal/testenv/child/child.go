// Package child runs a test's body in a child process of the test binary,
// bounded in memory (RLIMIT_AS) and time, so that a defect that hangs or
// eats memory (a FIFO opened for reading, an exponential expansion) fails
// the test instead of the machine.
package child

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// env names the test whose body a child process runs.
const env = "CELOS_TEST_CHILD"

// done is what a child prints when its body has run and passed, so that a
// -test.run pattern that matches nothing does not pass for a success.
const done = "child: body passed"

// Run runs body in a child process (this test binary, running only the
// calling test) whose address space is limited to memLimit bytes, and fails
// the test unless body returns nil within deadline. In the child, Run runs
// body itself.
func Run(t *testing.T, deadline time.Duration, memLimit uint64, body func() error) {
	t.Helper()
	if os.Getenv(env) == t.Name() {
		lim := &syscall.Rlimit{Cur: memLimit, Max: memLimit}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
			t.Fatal(err)
		}
		if err := body(); err != nil {
			t.Fatal(err)
		}
		fmt.Println(done)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("not finished within %s (killed):\n%s", deadline, out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, lastLines(string(out), 20))
	}
	if !strings.Contains(string(out), done) {
		t.Fatalf("the child did not run the test:\n%s", out)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
