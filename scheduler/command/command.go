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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/celos-go/celos/internal/atomicfile"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

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
	return s, nil
}

var (
	_ external.Service   = (*Service)(nil)
	_ external.Recoverer = (*Service)(nil)
)

// jobRecord is job.json.
type jobRecord struct {
	Workflow string    `json:"workflow"`
	Slot     string    `json:"slot"`
	Argv     []string  `json:"argv"`
	Dir      string    `json:"dir,omitempty"`
	PID      int       `json:"pid"`
	Boot     uint64    `json:"procStartTime,omitempty"` // /proc/<pid>/stat field 22, against PID reuse
	Started  time.Time `json:"started"`
	Timeout  int64     `json:"timeoutSeconds,omitempty"`
	// Supervised is true for jobs run by a supervisor (claim.json); false
	// in records of an older celos, which ran the command itself (PID, Boot).
	Supervised bool `json:"supervised,omitempty"`
}

// ExitRecord is exit.json: how a job ended.
type ExitRecord struct {
	ExitCode int       `json:"exitCode"`
	Signal   string    `json:"signal,omitempty"`
	TimedOut bool      `json:"timedOut,omitempty"`
	Killed   bool      `json:"killed,omitempty"`
	Error    string    `json:"error,omitempty"`
	Finished time.Time `json:"finished"`
}

func (r ExitRecord) success() bool {
	return r.ExitCode == 0 && r.Signal == "" && !r.TimedOut && !r.Killed && r.Error == ""
}

func (r ExitRecord) detail() string {
	switch {
	case r.Killed:
		return "killed"
	case r.TimedOut:
		return "timed out"
	case r.Error != "":
		return r.Error
	case r.Signal != "":
		return "signal " + r.Signal
	}
	return "exit " + strconv.Itoa(r.ExitCode)
}

// jobDir maps an external ID to its directory, refusing anything that is
// not an ID this service made.
func (s *Service) jobDir(externalID string) (string, error) {
	i := strings.LastIndexByte(externalID, '@')
	if i <= 0 {
		return "", fmt.Errorf("command service: %q is not a command job ID", externalID)
	}
	wf, job := externalID[:i], externalID[i+1:]
	if !workflow.IDPattern.MatchString(wf) || wf == "." || wf == ".." {
		return "", fmt.Errorf("command service: %q is not a command job ID", externalID)
	}
	if _, _, err := parseJobName(job); err != nil {
		return "", fmt.Errorf("command service: %q is not a command job ID", externalID)
	}
	return filepath.Join(s.dir, wf, job), nil
}

func parseJobName(name string) (slotTime time.Time, started int64, err error) {
	dot := strings.IndexByte(name, '.')
	if dot < 0 {
		return time.Time{}, 0, errors.New("no dot")
	}
	slotTime, err = time.Parse(slotLayout, name[:dot])
	if err != nil {
		return time.Time{}, 0, err
	}
	started, err = strconv.ParseInt(name[dot+1:], 10, 64)
	if err != nil || started < 0 || strconv.FormatInt(started, 10) != name[dot+1:] {
		return time.Time{}, 0, errors.New("bad start")
	}
	return slotTime, started, nil
}

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
	es := &w.ExternalService
	if len(es.Command) == 0 {
		return "", fmt.Errorf("workflow %s: command service with no command", w.ID)
	}
	started := s.now()
	name := id.Time.UTC().Format(slotLayout) + "." + strconv.FormatInt(started.UnixNano(), 10)
	extID := id.Workflow + "@" + name
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
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return "", s.abandon(extID, dir, fmt.Sprintf("celos could not start its supervisor: %v", err))
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	s.mu.Lock()
	s.procs[extID] = p
	s.mu.Unlock()
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

func exitStatus(rec ExitRecord) external.Status {
	return external.Status{Success: rec.success(), Detail: rec.detail()}
}

// Status reports on a job: running while its supervisor lives and has not
// recorded an end, then success iff the command exited 0 (not killed, not
// timed out).
func (s *Service) Status(ctx context.Context, w *workflow.Workflow, externalID string) (external.Status, error) {
	dir, err := s.jobDir(externalID)
	if err != nil {
		return external.Status{}, err
	}
	if rec, ok, err := readExit(dir); err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	} else if ok {
		return exitStatus(rec), nil
	}
	job, err := readJob(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return external.Status{}, fmt.Errorf("command service: no job %s", externalID)
		}
		// Created but nothing written: the server stopped in between.
		return external.Status{Detail: "never started: celos stopped while creating the job"}, nil
	}
	if err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	if !job.Supervised {
		return s.legacyStatus(dir, job, externalID)
	}
	c, claimed, err := readClaim(dir)
	if err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	s.mu.Lock()
	_, mine := s.procs[externalID]
	s.mu.Unlock()
	if !claimed {
		if mine {
			return external.Status{Running: true, Detail: "starting"}, nil
		}
		// No supervisor of this process, none claimed it: the server that
		// started it stopped first (Recover abandons such jobs; a slot is
		// RUNNING with one only if something else went wrong). It must
		// not start now.
		var won bool
		c, won, err = claim(dir, claimRecord{Run: false, Reason: "celos stopped before the job's supervisor started it", Time: s.now().UTC()})
		if err != nil {
			return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
		}
		if won {
			s.log.Warn("command job never started; abandoned", "job", externalID, "reason", c.Reason)
		}
	}
	if !c.Run {
		return external.Status{Detail: "never started: " + c.Reason}, nil
	}
	if mine || alive(jobRecord{PID: c.PID, Boot: c.Boot}, "") {
		if rec, ok, _ := readExit(dir); ok {
			return exitStatus(rec), nil
		}
		if mine {
			return external.Status{Running: true, Detail: "running"}, nil
		}
		return external.Status{Running: true, Detail: fmt.Sprintf("running (supervisor pid %d, started before celos restarted)", c.PID)}, nil
	}
	// Re-check exit.json: the supervisor writes it just before it exits.
	if rec, ok, err := readExit(dir); err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	} else if ok {
		return exitStatus(rec), nil
	}
	detail := fmt.Sprintf("exit status unknown: the job's supervisor (pid %d) ended without recording how the command ended (it was killed, or the machine restarted)", c.PID)
	if left := findByExternalID(externalID); len(left) > 0 {
		// So that a retry or rerun does not run beside them.
		killByExternalID(externalID)
		detail += fmt.Sprintf("; %d process(es) it left behind were killed", len(left))
		s.log.Warn("killed processes a job left behind", "job", externalID, "pids", left)
	}
	s.log.Warn("command job lost", "job", externalID, "reason", detail)
	return external.Status{Detail: detail}, nil
}

// legacyStatus reports on a job an older celos ran without a supervisor.
func (s *Service) legacyStatus(dir string, job jobRecord, externalID string) (external.Status, error) {
	if alive(job, externalID) {
		// Its supervisor (and timer) died with the old server: enforce the
		// timeout here, or the job would run, and its slot stay RUNNING,
		// forever.
		if job.Timeout > 0 && !job.Started.IsZero() && s.now().After(job.Started.Add(time.Duration(job.Timeout)*time.Second)) {
			killJob(job, externalID)
			rec := ExitRecord{ExitCode: -1, TimedOut: true, Finished: s.now().UTC()}
			if err := writeJSON(dir, "exit.json", rec); err != nil {
				return external.Status{}, fmt.Errorf("%w: command service: record timeout of %s: %v", external.ErrUnavailable, externalID, err)
			}
			s.log.Info("command ended", "job", externalID, "status", rec.detail())
			return external.Status{Detail: rec.detail()}, nil
		}
		return external.Status{Running: true, Detail: fmt.Sprintf("running (pid %d, started before celos restarted)", job.PID)}, nil
	}
	// Re-check exit.json: it may have been written since.
	if rec, ok, _ := readExit(dir); ok {
		return exitStatus(rec), nil
	}
	if job.PID == 0 {
		return external.Status{Detail: "exit status unknown: celos stopped while starting the process (it may or may not have run)"}, nil
	}
	detail := "exit status unknown: the process ended while celos was not running"
	// Its children may outlive it (a shell's background jobs, found by
	// CELOS_EXTERNAL_ID): stop them, so that the retry or rerun that may
	// follow this failure does not run beside them.
	if left := findByExternalID(externalID); len(left) > 0 {
		killJob(job, externalID)
		detail += fmt.Sprintf("; %d process(es) it left behind were killed", len(left))
		s.log.Warn("killed processes a job left behind", "job", externalID, "pids", left)
	}
	return external.Status{Detail: detail}, nil
}

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
				return fmt.Errorf("command service: no job %s", externalID)
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
	c, _, err := claim(dir, claimRecord{Run: false, Reason: "killed before it started", Time: s.now().UTC()})
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

// Recover finds the newest job of slot id started at or after since that
// runs or ran (see external.Recoverer). A job whose supervisor never
// claimed it (the server stopped between writing job.json and the start)
// is abandoned here, logged, and not returned: the engine then submits the
// slot once more, and the abandoned job can no longer start.
func (s *Service) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, id.Workflow))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	type cand struct {
		name    string
		started int64
	}
	var cands []cand
	want := id.Time.UTC().Format(slotLayout)
	for _, e := range entries {
		t, started, err := parseJobName(e.Name())
		if err != nil || t.Format(slotLayout) != want || started < since.UnixNano() {
			continue
		}
		cands = append(cands, cand{e.Name(), started})
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].started > cands[j].started })
	for _, c := range cands {
		extID := id.Workflow + "@" + c.name
		dir := filepath.Join(s.dir, id.Workflow, c.name)
		job, err := readJob(dir)
		if errors.Is(err, fs.ErrNotExist) {
			// Never got as far as job.json: nothing can start it.
			s.log.Warn("command job never started; the slot is submitted once more", "slot", id.String(), "job", extID,
				"reason", "celos stopped while creating the job (no job.json)")
			continue
		}
		if err != nil {
			return "", false, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
		}
		if !job.Supervised {
			return extID, true, nil
		}
		cl, won, err := claim(dir, claimRecord{Run: false, Reason: "celos stopped before the job's supervisor started it", Time: s.now().UTC()})
		if err != nil {
			return "", false, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
		}
		if cl.Run {
			return extID, true, nil
		}
		if won {
			appendLog(dir, "celos: not started: "+cl.Reason+"\n")
			s.log.Warn("command job never started; abandoned, the slot is submitted once more", "slot", id.String(), "job", extID, "reason", cl.Reason)
		}
	}
	return "", false, nil
}

// LogPath returns the path of a job's output log.
func (s *Service) LogPath(externalID string) (string, error) {
	dir, err := s.jobDir(externalID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "output.log"), nil
}

// ReadLog returns the last max bytes (all if max ≤ 0) of a job's output.
func (s *Service) ReadLog(externalID string, max int64) ([]byte, error) {
	p, err := s.LogPath(externalID)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("command service: log of %s: %w", externalID, err)
	}
	defer f.Close()
	if max > 0 {
		if fi, err := f.Stat(); err == nil && fi.Size() > max {
			if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
				return nil, err
			}
		}
	}
	return io.ReadAll(f)
}

// Prune removes the directories (records and logs) of jobs that ended and
// were started before before. Jobs still running, or whose end is not
// recorded, are kept. It returns the number of jobs removed.
func (s *Service) Prune(before time.Time) (int, error) {
	wfs, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("command service: %w", err)
	}
	n := 0
	var errs []error
	for _, wf := range wfs {
		if !wf.IsDir() || !workflow.IDPattern.MatchString(wf.Name()) {
			continue
		}
		jobs, err := os.ReadDir(filepath.Join(s.dir, wf.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, j := range jobs {
			_, started, err := parseJobName(j.Name())
			if err != nil || started >= before.UnixNano() {
				continue
			}
			dir := filepath.Join(s.dir, wf.Name(), j.Name())
			if _, ended, _ := readExit(dir); !ended && !s.abandoned(dir, wf.Name()+"@"+j.Name()) {
				continue
			}
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// abandoned reports whether a job without an exit record will never get
// one: this process is not supervising it and no process of it is alive (a
// supervised job: claimed as abandoned, or its supervisor died; an older
// job: its process ended while celos was down). Its status is final
// ("never started", "exit status unknown"), so Prune may remove it like an
// ended one.
func (s *Service) abandoned(dir, externalID string) bool {
	s.mu.Lock()
	_, mine := s.procs[externalID]
	s.mu.Unlock()
	if mine {
		return false
	}
	job, err := readJob(dir)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) || len(findByExternalID(externalID)) == 0
	}
	if job.Supervised {
		if c, ok, err := readClaim(dir); err == nil && ok {
			return !c.Run || (!alive(jobRecord{PID: c.PID, Boot: c.Boot}, "") && len(findByExternalID(externalID)) == 0)
		}
		// Not claimed: abandoned unless a supervisor (which carries the
		// job's CELOS_EXTERNAL_ID) is about to claim it.
		return len(findByExternalID(externalID)) == 0
	}
	return !alive(job, externalID) && len(findByExternalID(externalID)) == 0
}

// Wait blocks until the supervisor of every job this Service started has
// exited (after recording how the job ended), or ctx is done (for tests;
// a server's shutdown does not wait: its jobs outlive it).
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

func readJob(dir string) (jobRecord, error) {
	var r jobRecord
	data, err := os.ReadFile(filepath.Join(dir, "job.json"))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %v", filepath.Join(dir, "job.json"), err)
	}
	return r, nil
}

func readExit(dir string) (ExitRecord, bool, error) {
	var r ExitRecord
	data, err := os.ReadFile(filepath.Join(dir, "exit.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, false, fmt.Errorf("%s: %v", filepath.Join(dir, "exit.json"), err)
	}
	return r, true, nil
}

// writeJSON writes dir/name atomically and durably.
func writeJSON(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, name), append(data, '\n'), 0o644, true)
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
