package child

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Command returns (not started) a long-running child: this test binary
// again, running only test t, with Is(t) true in it and the extra
// environment variables extraEnv ("K=V"). Unlike Run and Start it runs no
// body for the caller and sets no limits: fault tests stop (SIGSTOP),
// continue and kill it, and talk to it through the pipes they set. A child
// still running at the end of the test is continued and killed.
func Command(t *testing.T, extraEnv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), env+"="+t.Name()), extraEnv...)
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}
