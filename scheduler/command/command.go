// Package command is the "command" external service: it runs a slot as a
// local process (workflow.ExternalService.Command), for installations without
// Oozie and for the demo.
//
// Each job has a directory <dir>/<workflow>/<slot>.<start nanos>/ holding
//
//	job.json    what to run: argv, dir, timeout (written by the server
//	            before anything starts)
//	claim.json  whether the command runs: written once, by the job's
//	            supervisor just before it starts the command ({"run": true,
//	            its PID}), or by a server abandoning a job whose supervisor
//	            never claimed it ({"run": false, reason}); never both
//	output.log  the command's stdout and stderr
//	exit.json   how it ended: {"exitCode", "signal", "timedOut", "killed", "error", "finished"}
//
// The external ID is "<workflow>@<slot>.<start nanos>" (slot as
// 20150913T134000Z), which names the directory.
//
// A job outlives the server. Submit starts a supervisor (this executable
// again, in a session of its own, so neither a kill -9 nor a SIGTERM of the
// server, nor a terminal's signals, reach it) which claims the job, starts
// the command in a process group of its own, enforces the timeout, waits
// for the command and writes exit.json atomically (temp file, fsync,
// rename). The server only reads these records and checks whether the
// supervisor lives (PID and kernel start time). So after a restart a job is
// running while its supervisor lives, and its real exit status is read once
// it ended, also when it ended while no server ran. A job whose supervisor
// never claimed it (the server stopped in between) is abandoned by Recover,
// so the engine submits the slot once more; it can no longer start. Only a
// job whose supervisor itself died (killed, the machine restarted) ends as
// "exit status unknown".
//
// Jobs recorded by a celos before the supervisor (job.json without
// "supervised") are still reported on: running while their process lives,
// "exit status unknown" once it is gone without exit.json.
package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// ErrNoJob is wrapped by Status and Kill for an external ID this service
// made the form of but has no job of: it never started here (a caller
// that recorded the ID before SubmitAt, as scheduler/cluster does, and
// stopped before the job was created), or its record was pruned.
var ErrNoJob = errors.New("no job")

// slotLayout is how a slot time appears in job directory names.
const slotLayout = "20060102T150405Z"

// Service runs slots as local processes. It implements external.Service
// and external.Recoverer.
type Service struct {
	dir string
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	procs map[string]*proc // supervisors started by this process that have not exited
	// logged: jobs whose end this process has logged (see ended); a
	// process sees each job end once, so this stays small.
	logged map[string]bool

	// Tied (tied.go): the lifeline's reading end, passed to every
	// supervisor, and its writing end, which only this process holds.
	lifeline, holder *os.File
	released         bool
	tiedDirs         []string // the directories of the jobs started
}

// proc is a supervisor this process started (its child until it exits).
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited and was reaped
}

// Options configure a Service.
type Options struct {
	// Logger receives job starts and ends; nil means slog.Default().
	Logger *slog.Logger
	// Tied ties the jobs to this process (celos test's sandboxes; a
	// server's jobs outlive it): each job's supervisor becomes the reaper
	// of everything its command starts, however it detaches (setsid,
	// env -i, a double fork), stays while any of it runs, and kills it
	// all when Release is called or this process ends in any way, even
	// by SIGKILL (tied.go).
	Tied bool
}

// New returns a service keeping its jobs under dir (created if missing).
func New(dir string, opts Options) (*Service, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("command service jobs directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("command service: %w", err)
	}
	s := &Service{dir: abs, log: opts.Logger, now: time.Now, procs: make(map[string]*proc)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.Tied {
		if s.lifeline, s.holder, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("command service: the jobs' lifeline: %w", err)
		}
	}
	return s, nil
}

var (
	_ external.Service   = (*Service)(nil)
	_ external.Recoverer = (*Service)(nil)
)

// Env returns the variables a job of slot id gets besides the server's
// environment: CELOS_WORKFLOW, CELOS_SLOT_TIME (2015-09-13T13:40:00.000Z),
// CELOS_SLOT_ID, CELOS_YEAR … CELOS_SECOND, then the workflow's own env with
// ${...} substituted (which may override them).
func Env(w *workflow.Workflow, id slot.ID) []string {
	v := external.TimeVars(id.Time)
	env := []string{
		"CELOS_WORKFLOW=" + id.Workflow,
		"CELOS_SLOT_TIME=" + slot.FormatTime(id.Time),
		"CELOS_SLOT_ID=" + id.String(),
		"CELOS_YEAR=" + v["year"],
		"CELOS_MONTH=" + v["month"],
		"CELOS_DAY=" + v["day"],
		"CELOS_HOUR=" + v["hour"],
		"CELOS_MINUTE=" + v["minute"],
		"CELOS_SECOND=" + v["second"],
	}
	keys := make([]string, 0, len(w.ExternalService.Env))
	for k := range w.ExternalService.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+external.Expand(w.ExternalService.Env[k], id.Time))
	}
	return env
}

// Wait blocks until the supervisor of every job this Service started has
// exited (after recording how the job ended), or ctx is done (for tests;
// a server's shutdown does not wait: its jobs outlive it). A tied job's
// supervisor exits once nothing its command started runs, or at Release.
func (s *Service) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		var p *proc
		for _, q := range s.procs {
			p = q
			break
		}
		s.mu.Unlock()
		if p == nil {
			return nil
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
