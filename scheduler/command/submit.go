package command

// Submitting a job: its directory and job.json, then its supervisor.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Submit starts the slot's job and returns its external ID once the
// job's supervisor has started the command (or recorded that it cannot:
// a command not found, not executable, a bad working directory is still a
// job, recorded as ended with the error, so the slot fails or is retried
// instead of staying READY forever). If the supervisor does not report in
// time (ctx) or dies first, the job is abandoned unless it claimed the job
// meanwhile, so an error never leaves a command that may still start. A
// failure of the service itself (its job directory not writable, no
// supervisor) is an error wrapping external.ErrUnavailable.
func (s *Service) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	return s.SubmitAt(ctx, w, id, s.now())
}

// JobID is the external ID of the job of slot id that Submit (or SubmitAt)
// starts at started: the slot's time and the start's, in nanoseconds.
func JobID(id slot.ID, started time.Time) string {
	return id.Workflow + "@" + id.Time.UTC().Format(slotLayout) + "." + strconv.FormatInt(started.UnixNano(), 10)
}

// SubmitAt is Submit with the job's start time given, so that a caller can
// record the job's ID (JobID) before the job exists (scheduler/cluster
// does, so that an instance that dies as the job starts leaves a record of
// it). Two submissions of a slot with the same started time are one job:
// the second fails.
func (s *Service) SubmitAt(ctx context.Context, w *workflow.Workflow, id slot.ID, started time.Time) (string, error) {
	es := &w.ExternalService
	if len(es.Command) == 0 {
		return "", fmt.Errorf("workflow %s: command service with no command", w.ID)
	}
	extID := JobID(id, started)
	dir, err := s.jobDir(extID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	out, err := os.OpenFile(filepath.Join(dir, "output.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return "", fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	defer out.Close() // the supervisor has its own copy
	argv := make([]string, len(es.Command))
	for i, a := range es.Command {
		argv[i] = external.Expand(a, id.Time)
	}
	rec := jobRecord{Workflow: id.Workflow, Slot: slot.FormatTime(id.Time), Argv: argv, Dir: es.Dir, Started: started.UTC(), Timeout: es.TimeoutSeconds, Supervised: true}
	// job.json is written before anything starts, so that a crash at any
	// point after it leaves a job Recover finds (and abandons if its
	// supervisor never claimed it).
	if err := writeJSON(dir, "job.json", rec); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	r, pw, err := os.Pipe()
	if err != nil {
		return "", s.abandon(extID, dir, fmt.Sprintf("celos could not start its supervisor: %v", err))
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe", // this executable, even if its file was replaced since
		Args:   []string{supervisorArg0, dir},
		Env:    append(os.Environ(), append(Env(w, id), "CELOS_EXTERNAL_ID="+extID)...),
		Stdout: out, Stderr: out,
		ExtraFiles: []*os.File{pw},
		// Its own session: no signal for celos's process group or
		// terminal reaches it, and it outlives the server.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if _, err := os.Stat(cmd.Path); err != nil {
		if exe, eerr := os.Executable(); eerr == nil {
			cmd.Path = exe
		}
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	err = s.start(extID, dir, p)
	pw.Close()
	if errors.Is(err, ErrReleased) {
		s.abandon(extID, dir, err.Error())
		return "", fmt.Errorf("command service: job %s: %w", extID, err)
	}
	if err != nil {
		return "", s.abandon(extID, dir, fmt.Sprintf("celos could not start its supervisor: %v", err))
	}
	go func() {
		cmd.Wait() // reap it; a restarted server's supervisors are reaped by init
		s.mu.Lock()
		delete(s.procs, extID)
		s.mu.Unlock()
		close(p.done)
	}()
	deadline, _ := ctx.Deadline()
	msg := readReport(r, deadline)
	switch {
	case strings.HasPrefix(msg, "started "):
		s.log.Info("command started", "job", extID, "pid", strings.TrimPrefix(msg, "started "), "supervisor", cmd.Process.Pid, "argv", argv)
		return extID, nil
	case msg == "ended":
		s.log.Warn("command could not start", "job", extID, "argv", argv)
		return extID, nil
	}
	// No report: the supervisor died, failed or is slow. The claim
	// decides whether the command runs.
	why := "its supervisor did not report it started"
	if msg != "" {
		why += ": " + msg
	} else if ctx.Err() != nil {
		why += " in time: " + ctx.Err().Error()
	}
	return "", s.abandon(extID, dir, why)
}

// start starts a job's supervisor (p.cmd) and records it among s.procs.
// A tied one gets the lifeline, under the lock throughout: Release, which
// refuses new jobs, waits for s.procs and then closes the lifeline, sees
// every supervisor that has it.
func (s *Service) start(extID, dir string, p *proc) error {
	if s.lifeline == nil {
		if err := p.cmd.Start(); err != nil {
			return err
		}
		s.mu.Lock()
		s.procs[extID] = p
		s.mu.Unlock()
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return ErrReleased
	}
	p.cmd.Args = append(p.cmd.Args, tiedArg)
	p.cmd.ExtraFiles = append(p.cmd.ExtraFiles, s.lifeline)
	if err := p.cmd.Start(); err != nil {
		return err
	}
	s.tiedDirs = append(s.tiedDirs, dir)
	s.procs[extID] = p
	return nil
}

// abandon makes sure a job Submit could not see start never runs
// (claim.json {"run": false}) unless its supervisor claimed it first. It
// returns Submit's error, wrapping ErrUnavailable: the slot stays READY with
// its submit intent, and the next step's Recover finds the job if it runs
// after all, or skips it if abandoned and submits the slot once more.
func (s *Service) abandon(extID, dir, why string) error {
	c, _, err := claim(dir, claimRecord{Run: false, Reason: why, Time: s.now().UTC()})
	if err != nil {
		return fmt.Errorf("%w: command service: job %s: %s; and abandoning it failed: %v", external.ErrUnavailable, extID, why, err)
	}
	if c.Run {
		return fmt.Errorf("%w: command service: job %s: %s, but its supervisor claimed it: it runs (found by Recover)", external.ErrUnavailable, extID, why)
	}
	appendLog(dir, "celos: not started: "+why+"\n")
	s.log.Warn("command job never started; abandoned, the slot is submitted once more", "job", extID, "reason", why)
	return fmt.Errorf("%w: command service: job %s never started (%s); abandoned", external.ErrUnavailable, extID, why)
}

func appendLog(dir, msg string) {
	f, err := os.OpenFile(filepath.Join(dir, "output.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	f.WriteString(msg)
	f.Close()
}
