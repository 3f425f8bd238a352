package command

// Killing a job, and the process checks (/proc) behind liveness and kill.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/celos-go/celos/schema/workflow"
)

// killedBeforeStart is the reason Kill abandons a job with.
const killedBeforeStart = "killed before it started"

// Kill stops a job's command (its process group) and records it killed.
// Killing a finished job is not an error. A job that has not started yet
// is abandoned, so it never does.
func (s *Service) Kill(ctx context.Context, w *workflow.Workflow, externalID string) error {
	dir, err := s.jobDir(externalID)
	if err != nil {
		return err
	}
	if _, ok, _ := readExit(dir); ok {
		return nil
	}
	job, err := readJob(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(dir); serr != nil {
				return fmt.Errorf("command service: %w %s", ErrNoJob, externalID)
			}
			return nil
		}
		return err
	}
	if !job.Supervised {
		if alive(job, externalID) {
			killJob(job, externalID)
		} else {
			// The job's process ended while celos was down; children it
			// left (found by their environment, never by a PID that may be
			// reused) are stopped too.
			killByExternalID(externalID)
		}
		return writeJSON(dir, "exit.json", ExitRecord{ExitCode: -1, Killed: true, Finished: s.now().UTC()})
	}
	c, _, err := claim(dir, claimRecord{Run: false, Reason: killedBeforeStart, Time: s.now().UTC()})
	if err != nil {
		return fmt.Errorf("command service: kill %s: %w", externalID, err)
	}
	if !c.Run {
		return nil // abandoned: it never runs
	}
	s.mu.Lock()
	p, mine := s.procs[externalID]
	s.mu.Unlock()
	sup := jobRecord{PID: c.PID, Boot: c.Boot}
	if mine || alive(sup, "") {
		// The supervisor kills the command's group and records "killed".
		syscall.Kill(c.PID, killSignal)
		for {
			if _, ok, _ := readExit(dir); ok {
				return nil
			}
			if !alive(sup, "") {
				break
			}
			var done <-chan struct{}
			if mine {
				done = p.done
			}
			select {
			case <-done:
			case <-ctx.Done():
				return fmt.Errorf("command service: kill %s: %w", externalID, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
		if _, ok, _ := readExit(dir); ok {
			return nil
		}
	}
	// No supervisor: stop what is left of the job, record the kill.
	killByExternalID(externalID)
	return writeJSON(dir, "exit.json", ExitRecord{ExitCode: -1, Killed: true, Finished: s.now().UTC()})
}

// killJob kills the process group of a job this Service does not
// supervise, and those of any process carrying its external ID.
func killJob(job jobRecord, externalID string) {
	if job.PID > 0 {
		killGroup(job.PID)
	}
	killByExternalID(externalID)
}

// killByExternalID kills the process groups of the processes carrying
// externalID in their environment (never celos's own group).
func killByExternalID(externalID string) {
	for _, pid := range findByExternalID(externalID) {
		if pg, err := syscall.Getpgid(pid); err == nil && pg != syscall.Getpgrp() {
			killGroup(pg)
		}
	}
}

func killGroup(pid int) {
	if pid > 0 {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// alive reports whether the job's process still runs: the PID exists and,
// where /proc tells, it is the same process (same kernel start time). A
// job recorded without a PID (celos stopped while starting it) is alive
// while a process has its external ID in its environment.
func alive(job jobRecord, externalID string) bool {
	if job.PID <= 0 {
		return externalID != "" && len(findByExternalID(externalID)) > 0
	}
	if err := syscall.Kill(job.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if job.Boot != 0 {
		if st := procStartTime(job.PID); st != 0 && st != job.Boot {
			return false
		}
	}
	if zombie(job.PID) {
		return false
	}
	return true
}

// findByExternalID returns the live processes (not zombies) whose
// environment holds CELOS_EXTERNAL_ID=externalID: the job's process and its
// children. Processes of other users are not readable and not found.
func findByExternalID(externalID string) []int {
	want := []byte("CELOS_EXTERNAL_ID=" + externalID + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue
		}
		if !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// procStartTime reads field 22 of /proc/<pid>/stat (0 if unavailable).
func procStartTime(pid int) uint64 {
	f := procStatFields(pid)
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

func zombie(pid int) bool {
	f := procStatFields(pid)
	return len(f) > 0 && f[0] == "Z"
}

// procStatFields returns the fields of /proc/<pid>/stat after the command
// name (field 3, the state, first).
func procStatFields(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}
