package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
)

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(data), ") Z ")
}

// TestRunKillsOnlyItsOrphans: in a process that adopted the orphans, a
// run kills the processes its commands left running (a background child,
// one in a session of its own; their tied supervisors kill them when the
// case ends) and reports them, and leaves the process's other children
// alone (a test's servers when celos test runs in-process).
func TestRunKillsOnlyItsOrphans(t *testing.T) {
	if err := AdoptOrphans(); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })

	pids := filepath.Join(t.TempDir(), "pids")
	p := copyProject()
	p.Workflows[0].ExternalService = fixture.Command("sh", "-c", `sleep 4101 & echo $! >> `+pids+`; setsid sleep 4102 & echo $! >> `+pids+`; mkdir -p "$CELOS_HDFS_PREFIX/out/${hour}" && tr a-z A-Z < "$CELOS_HDFS_PREFIX/in/${hour}/data" > "$CELOS_HDFS_PREFIX/out/${hour}/data"`)
	var killed int
	var kerr error
	res := run(t, Options{Project: p, Orphans: func(n int, err error) { killed, kerr = n, err }}, okCase("ok"))
	if !res[0].Passed {
		t.Fatalf("failed: %q", res[0].Failures)
	}
	data, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	left := strings.Fields(string(data))
	for _, f := range left {
		pid, _ := strconv.Atoi(f)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		if alive(pid) {
			t.Errorf("process %d that a command left still runs after the run", pid)
		}
	}
	if killed != len(left) || kerr != nil || len(left) != 6 {
		t.Errorf("Orphans(%d, %v), want %d killed (3 slots, 2 each)", killed, kerr, len(left))
	}
	if !alive(other.Process.Pid) {
		t.Error("the run killed another child of the process")
	}
}

// TestKillOrphansIsTheNet: the net under the tied supervisors (one killed
// itself leaves its processes to this process, their reaper): the orphans
// whose environment names the run's prefix, or one under it, are killed
// and counted; those of another run, or with no prefix, are left alone.
func TestKillOrphansIsTheNet(t *testing.T) {
	if err := AdoptOrphans(); err != nil {
		t.Fatal(err)
	}
	root := "/tmp/celos-test-net-" + strconv.Itoa(os.Getpid())
	orphan := func(prefix string) int {
		t.Helper()
		cmd := exec.Command("sh", "-c", "sleep 4121 >/dev/null 2>&1 & echo $!")
		cmd.Env = append(os.Environ(), PrefixEnv+"="+prefix)
		out, err := cmd.Output() // sh exits: its sleep is orphaned to this process
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL); syscall.Wait4(pid, nil, 0, nil) })
		return pid
	}
	mine, under := orphan(root), orphan(root+"/case")
	other, sibling := orphan(root+"-other"), orphan("/elsewhere")
	n, err := killOrphans(root, orphansTimeout)
	if err != nil || n != 2 {
		t.Errorf("killOrphans = %d, %v; want 2, nil", n, err)
	}
	for _, pid := range []int{mine, under} {
		if alive(pid) {
			t.Errorf("orphan %d of the run still runs", pid)
		}
	}
	for _, pid := range []int{other, sibling} {
		if !alive(pid) {
			t.Errorf("orphan %d of another run was killed", pid)
		}
	}
}
