package statedb

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockChildEnv makes this test binary a server that opens the state
// database named by its value, starts `sleep <CELOS_LOCK_CHILD_HOLD>` with
// the lock file's descriptor (as a process it forks holds it until it
// execs), prints the sleep's pid and dies without closing anything.
const lockChildEnv = "CELOS_STATEDB_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockChildEnv); dir != "" {
		db, err := Open(dir)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		sleep := exec.Command("sleep", os.Getenv("CELOS_LOCK_CHILD_HOLD"))
		sleep.ExtraFiles = []*os.File{db.lock}
		if err := sleep.Start(); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(sleep.Process.Pid) + "\n")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	os.Exit(m.Run())
}

// killedHolder runs this test binary as a server that dies with SIGKILL
// while a process it started holds the lock for hold seconds, and
// returns that process's pid once the server is gone.
func killedHolder(t *testing.T, dir, hold string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir, "CELOS_LOCK_CHILD_HOLD="+hold)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the holder: %v %s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the holder's output %q: %v", out, err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// TestLockOfAKilledServer: a server killed with SIGKILL (reaped) while a
// process it forked still held the lock file's descriptor (between the
// fork and the exec of a command job's supervisor, where O_CLOEXEC has not
// acted yet) left the database locked, and a restart at once failed
// naming the dead server. Open now waits for such a holder, as long as
// the process the lock file names is gone.
func TestLockOfAKilledServer(t *testing.T) {
	dir := t.TempDir()
	killedHolder(t, dir, "2")
	db, err := Open(dir)
	if err != nil {
		t.Fatalf("open after the server was killed: %v", err)
	}
	db.Close()
}

// TestLockOfAKilledServerHeldOn: a process the dead server started that
// holds the lock for longer than Open waits (it inherited the descriptor
// and never exec'd) is named as such, not as the dead server.
func TestLockOfAKilledServerHeldOn(t *testing.T) {
	defer func(d time.Duration) { deadHolderWait = d }(deadHolderWait)
	deadHolderWait = 300 * time.Millisecond
	dir := t.TempDir()
	killedHolder(t, dir, "30")
	_, err := Open(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "which has exited") {
		t.Fatalf("open while a process of the killed server holds the lock: %v", err)
	}
}
