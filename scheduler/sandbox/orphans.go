package sandbox

// The processes a case's commands leave running: a command that starts a
// background child and exits, or one whose child leaves its session
// (setsid, a daemon), clears its environment (env -i) or is double-forked,
// leaves processes that the command service's kill (the job's process
// group) does not reach. Each case's command service is tied
// (command.Options.Tied): a job's supervisor is the reaper of everything
// its command starts and kills all of it when the case ends (Release) or
// when celos test ends in any way, SIGKILL included. What is here is the
// net under that: celos test makes itself the reaper (Linux's child
// subreaper) of the processes of a supervisor that was itself killed,
// and Run ends those of its run — the children whose environment names a
// case prefix of the run (PrefixEnv, which every command job has) — once
// every case has cleaned up. Other children of the process (a test's
// servers) are left alone.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// orphansTimeout bounds killing the orphans of a run.
const orphansTimeout = 30 * time.Second

// AdoptOrphans makes the calling process the reaper of the orphans of
// its descendants (PR_SET_CHILD_SUBREAPER): a process whose parent ends
// becomes its child, not init's. For a process whose only children are
// the command service's job supervisors (celos test), never a library's
// caller that has children of its own to keep.
func AdoptOrphans() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become the reaper of the commands' orphans: %w", err)
	}
	return nil
}

// killOrphans kills (SIGKILL) every child of this process that still
// runs and whose environment has PrefixEnv at root or under it, and the
// children those leave (adopted in turn), until none is left or timeout
// passes, and returns how many it killed (their zombies are reaped by
// init when celos exits).
func killOrphans(root string, timeout time.Duration) (int, error) {
	killed := map[int]bool{}
	for deadline := time.Now().Add(timeout); ; {
		kids, err := children(os.Getpid(), root)
		if err != nil {
			return len(killed), err
		}
		for _, pid := range kids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
			}
		}
		live := len(kids)
		if live == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("%d processes the commands left still run after %v", live, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// children lists the processes whose parent is ppid (/proc/PID/stat) and
// whose environment has PrefixEnv at root or under it.
func children(ppid int, root string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// After the command name (in parentheses, which it may contain):
		// state, ppid, ...
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if p, err := strconv.Atoi(f[1]); err != nil || p != ppid {
			continue
		}
		// A zombie has ended (its environment is gone too): left to be
		// reaped by whoever waits for it, or by init when celos exits.
		if f[0] != "Z" && ofRun(pid, root) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// ofRun reports whether process pid's environment has PrefixEnv at root
// or under it.
func ofRun(pid int, root string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(data), "\x00") {
		if v, ok := strings.CutPrefix(kv, PrefixEnv+"="); ok {
			return v == root || strings.HasPrefix(v, root+"/")
		}
	}
	return false
}
