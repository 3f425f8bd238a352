package sandbox

// The processes a case's commands leave running: a command that starts a
// background child and exits, or one whose child starts a session of its
// own (setsid, a daemon), leaves processes that neither the command
// service's kill (the job's process group) nor the end of the case reach.
// celos test makes itself their reaper (Linux's child subreaper): every
// such orphan becomes its child, and KillOrphans ends them all when the
// run is over.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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

// KillOrphans kills (SIGKILL) and reaps every child of this process that
// still runs, and the children those leave (they are adopted in turn),
// until none is left or timeout passes; it returns how many it killed.
// Called once every case has cleaned up (its jobs ended and waited for),
// so that what is left is what the commands left behind.
func KillOrphans(timeout time.Duration) (int, error) {
	killed := map[int]bool{}
	for deadline := time.Now().Add(timeout); ; {
		kids, err := children(os.Getpid())
		if err != nil {
			return len(killed), err
		}
		live := 0
		for _, k := range kids {
			if k.zombie {
				var ws syscall.WaitStatus
				syscall.Wait4(k.pid, &ws, syscall.WNOHANG, nil)
				continue
			}
			live++
			if syscall.Kill(k.pid, syscall.SIGKILL) == nil {
				killed[k.pid] = true
			}
		}
		if live == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("%d processes the commands left still run after %v", live, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type child struct {
	pid    int
	zombie bool
}

// children lists the processes whose parent is ppid (/proc/PID/stat).
func children(ppid int) ([]child, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []child
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
		if p, err := strconv.Atoi(f[1]); err == nil && p == ppid {
			out = append(out, child{pid: pid, zombie: f[0] == "Z"})
		}
	}
	return out, nil
}
