package command

// Tied jobs (Options.Tied, for celos test's sandboxes): everything a job
// starts ends with the process that started it.
//
// A job's command runs in a process group of its own, but what it starts
// may leave it (setsid, a daemon), clear its environment (env -i, so no
// CELOS_EXTERNAL_ID) and be orphaned (a double fork): neither a kill of
// the group nor a search of the environment finds it. A tied job's
// supervisor is therefore the child subreaper of its command: every
// process the command starts stays its descendant, however it detaches,
// so the supervisor can find them all in /proc by their parents. And it
// holds the reading end of a pipe (the lifeline) whose writing end only
// the Service's process has: when that process closes it (Release) or
// ends in any way, SIGKILL included, the kernel closes it and the
// supervisor reads end of file, kills its command and every descendant,
// and exits. A pipe rather than PR_SET_PDEATHSIG: the parent-death signal
// fires when the thread that started the child ends (Go's threads come
// and go), and is cleared in the children of a fork.
//
// While the command runs, the supervisor reaps nothing but it (a wait for
// any child could take the command's status): what ends of what it
// adopted meanwhile stays a zombie until the command ends.
//
// The limit: a process that leaves the tree altogether — started by
// another service (ssh to another host, systemd-run, at, a daemon asked
// over a socket) — is not a descendant, and a supervisor killed with
// SIGKILL itself kills nothing (its descendants then go to the next
// subreaper up, celos test: sandbox.AdoptOrphans).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tiedArg is the supervisor's second argument for a tied job; the
// lifeline is its fd 4.
const tiedArg = "tied"

// leftRecord is left.json, written by a tied job's supervisor that killed
// processes the job left running.
type leftRecord struct {
	Killed int    `json:"killed"`
	Error  string `json:"error,omitempty"`
}

// leftPoll is how often a tied supervisor whose command has ended looks
// whether what the command left running has ended too.
const leftPoll = 100 * time.Millisecond

// leftTimeout bounds killing what a tied job left running.
const leftTimeout = 30 * time.Second

// ErrReleased is returned by Submit on a tied Service after Release.
var ErrReleased = errors.New("command service released: it starts no more jobs")

// tie makes this supervisor the reaper of its command's descendants and
// returns a channel closed when its lifeline (fd 4) is cut.
func tie() (<-chan struct{}, error) {
	syscall.CloseOnExec(4) // the command must not hold the lifeline
	lifeline := os.NewFile(4, "lifeline")
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become the reaper of the job's processes: %w", err)
	}
	cut := make(chan struct{})
	go func() {
		io.Copy(io.Discard, lifeline) // nothing is written: returns at end of file
		close(cut)
	}()
	return cut, nil
}

// afterCommand is a tied supervisor's life after its command ended and
// its end was recorded: it reaps what the command left running as it
// ends, and when the lifeline is cut kills what is left, recording how
// many in left.json — not those of the command's process group if it
// was killed (killedGroup): they died with the job. It returns once
// nothing is left.
func afterCommand(dir string, cut <-chan struct{}, killedGroup int, logf func(string, ...any)) {
	for {
		// The command has been reaped: what it left running was made
		// this process's children (it is their reaper) as it exited, so
		// none left means no descendant left, without reading /proc.
		if !reapAll() {
			return
		}
		select {
		case <-cut:
			n, err := killDescendants(leftTimeout, killedGroup)
			rec := leftRecord{Killed: n}
			if err != nil {
				rec.Error = err.Error()
				logf("%v", err)
			}
			if n > 0 {
				logf("killed %d processes the job left running", n)
			}
			if n > 0 || err != nil {
				if werr := writeJSON(dir, "left.json", rec); werr != nil {
					logf("record the processes the job left running: %v", werr)
				}
			}
			return
		case <-time.After(leftPoll):
		}
	}
}

// reapAll reaps the ended children of this process (orphans it adopted),
// without blocking, and reports whether it has children left.
func reapAll() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case errors.Is(err, syscall.ECHILD):
			return false
		case err != nil || pid == 0:
			return true // children that still run
		}
	}
}

// killDescendants kills (SIGKILL) every descendant of this process, and
// those they start meanwhile, until none is left or timeout passes; it
// returns how many it killed, not counting those of process group
// notCounted (already killed, still dying; 0: none).
func killDescendants(timeout time.Duration, notCounted int) (int, error) {
	killed := map[int]bool{}
	for deadline := time.Now().Add(timeout); ; {
		left := descendants(os.Getpid())
		for _, pid := range left {
			pg, _ := syscall.Getpgid(pid)
			if syscall.Kill(pid, syscall.SIGKILL) == nil && (notCounted == 0 || pg != notCounted) {
				killed[pid] = true
			}
		}
		reapAll()
		if len(left) == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			return len(killed), fmt.Errorf("%d processes the job left still run after %v", len(left), timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// descendants lists the live (not zombie) descendants of process root, by
// the parents /proc/PID/stat names.
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	live := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStatFields(pid)
		if len(f) < 2 {
			continue // ended meanwhile
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		kids[ppid] = append(kids[ppid], pid)
		live[pid] = f[0] != "Z"
	}
	var out []int
	for queue := kids[root]; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		if live[pid] {
			out = append(out, pid)
		}
		queue = append(queue, kids[pid]...)
	}
	return out
}

// Release cuts the lifeline of a tied Service: the supervisor of every
// job it started kills its command if it still runs (recorded as
// killed) and every process the job left running, and exits. Release
// waits for them (or ctx) and returns how many processes the jobs left
// running were killed. The Service starts no job after it. On a Service
// that is not tied it is Wait.
func (s *Service) Release(ctx context.Context) (int, error) {
	s.mu.Lock()
	if s.lifeline != nil && !s.released {
		s.released = true
		s.holder.Close()
	}
	dirs := s.tiedDirs
	s.mu.Unlock()
	if err := s.Wait(ctx); err != nil {
		return 0, err
	}
	if s.lifeline != nil {
		s.lifeline.Close() // released, Submit no longer passes it on
	}
	total := 0
	var errs []error
	for _, dir := range dirs {
		data, err := readRecord(dir, "left.json")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var rec leftRecord
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s/left.json: %w", dir, err))
			continue
		}
		total += rec.Killed
		if rec.Error != "" {
			errs = append(errs, errors.New(strings.TrimSpace(rec.Error)))
		}
	}
	return total, errors.Join(errs...)
}
