// Package command is the "command" external service: it runs a slot as a
// local process (schema.ExternalService.Command), for installations without
// Oozie and for the demo.
//
// Each job has a directory <dir>/<workflow>/<slot>.<start nanos>/ holding
//
//	job.json    what was started: argv, dir, PID and its kernel start time
//	            (written before the start without the PID, then with it)
//	output.log  the process's stdout and stderr
//	exit.json   how it ended: {"exitCode", "signal", "timedOut", "killed", "error", "finished"}
//
// The external ID is "<workflow>@<slot>.<start nanos>" (slot as
// 20150913T134000Z), which names the directory.
//
// A supervisor goroutine waits for the process and writes exit.json
// atomically (temp file, fsync, rename) when it ends, so a finished run is
// never lost. After a server restart the process has no supervisor: if it
// is still alive (same PID and kernel start time as recorded) the job is
// reported running; once it is gone without an exit.json, its exit status
// cannot be known and the job is reported failed ("exit status unknown"),
// so the slot is retried or fails, and never stays RUNNING forever.
// Processes run in their own process group; Kill and the timeout kill the
// whole group.
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
	"github.com/celos-go/celos/schema"
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
	procs map[string]*proc // jobs started by this process and not yet recorded as ended
	// unrecorded holds how jobs of this process ended when exit.json could
	// not be written (Status retries the write), so a finished run is not
	// reported lost ("exit status unknown") while this process knows it.
	unrecorded map[string]ExitRecord
}

type proc struct {
	cmd      *exec.Cmd
	done     chan struct{}
	killed   bool
	timedOut bool
	exited   bool // Wait returned (guarded by Service.mu)
}

// afterWait, if set, runs in the supervisor between Wait returning and the
// timeout timer being stopped (tests use it to widen that window).
var afterWait func()

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
	s := &Service{dir: abs, log: opts.Logger, now: time.Now, procs: make(map[string]*proc), unrecorded: make(map[string]ExitRecord)}
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
	if !schema.IDPattern.MatchString(wf) || wf == "." || wf == ".." {
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
func Env(w *schema.Workflow, id slot.ID) []string {
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

// Submit starts the slot's command and returns its external ID. A command
// that cannot be started (not found, not executable, a bad working
// directory) is still a job: it is recorded as ended with the error, so the
// slot fails (or is retried) instead of staying READY forever. Only a
// failure of the service itself (its job directory not writable) is an
// error, wrapping external.ErrUnavailable.
func (s *Service) Submit(ctx context.Context, w *schema.Workflow, id slot.ID) (string, error) {
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
	argv := make([]string, len(es.Command))
	for i, a := range es.Command {
		argv[i] = external.Expand(a, id.Time)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = es.Dir
	cmd.Env = append(os.Environ(), append(Env(w, id), "CELOS_EXTERNAL_ID="+extID)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	rec := jobRecord{Workflow: id.Workflow, Slot: slot.FormatTime(id.Time), Argv: argv, Dir: es.Dir, Started: started.UTC(), Timeout: es.TimeoutSeconds}
	// job.json is written before the process starts (without its PID), so
	// that a crash at any point after the start leaves a job Recover finds:
	// the slot is then never run twice. A job.json without a PID whose
	// process cannot be found (by CELOS_EXTERNAL_ID in its environment)
	// ends as "exit status unknown".
	if err := writeJSON(dir, "job.json", rec); err != nil {
		out.Close()
		os.RemoveAll(dir)
		return "", fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		appendLog(dir, fmt.Sprintf("celos: cannot start %q: %v\n", argv[0], err))
		if werr := writeJSON(dir, "job.json", rec); werr != nil {
			return "", fmt.Errorf("%w: command service: %v", external.ErrUnavailable, werr)
		}
		if werr := writeJSON(dir, "exit.json", ExitRecord{ExitCode: -1, Error: "cannot start: " + err.Error(), Finished: s.now().UTC()}); werr != nil {
			return "", fmt.Errorf("%w: command service: %v", external.ErrUnavailable, werr)
		}
		s.log.Warn("command could not start", "job", extID, "error", err)
		return extID, nil
	}
	out.Close() // the child has its own copy
	rec.PID = cmd.Process.Pid
	rec.Boot = procStartTime(rec.PID)
	p := &proc{cmd: cmd, done: make(chan struct{})}
	s.mu.Lock()
	s.procs[extID] = p
	s.mu.Unlock()
	if err := writeJSON(dir, "job.json", rec); err != nil {
		s.log.Error("command service: record job", "job", extID, "error", err)
	}
	s.log.Info("command started", "job", extID, "pid", rec.PID, "argv", argv)
	go s.supervise(extID, dir, p, time.Duration(es.TimeoutSeconds)*time.Second)
	return extID, nil
}

func appendLog(dir, msg string) {
	f, err := os.OpenFile(filepath.Join(dir, "output.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	f.WriteString(msg)
	f.Close()
}

// supervise waits for the process, enforces the timeout, and records how it
// ended.
func (s *Service) supervise(extID, dir string, p *proc, timeout time.Duration) {
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if p.exited {
				// Wait returned before the timer fired: the run ended in
				// time, and its PID may be reused already.
				return
			}
			p.timedOut = true
			killGroup(p.cmd.Process.Pid)
		})
	}
	err := p.cmd.Wait()
	if afterWait != nil {
		afterWait()
	}
	s.mu.Lock()
	p.exited = true
	s.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	s.mu.Lock()
	rec := ExitRecord{ExitCode: p.cmd.ProcessState.ExitCode(), TimedOut: p.timedOut, Killed: p.killed, Finished: s.now().UTC()}
	s.mu.Unlock()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		rec.Signal = ws.Signal().String()
	} else {
		// It exited on its own: a timer that fired after it had ended
		// (between Wait returning and the timer being stopped) did not
		// time it out.
		rec.TimedOut = false
	}
	if err != nil && rec.ExitCode == -1 && rec.Signal == "" {
		rec.Error = err.Error()
	}
	werr := writeJSON(dir, "exit.json", rec)
	if werr != nil {
		s.log.Error("command service: record exit status", "job", extID, "error", werr)
	}
	s.log.Info("command ended", "job", extID, "status", rec.detail())
	s.mu.Lock()
	if werr != nil {
		s.unrecorded[extID] = rec
	}
	delete(s.procs, extID)
	s.mu.Unlock()
	close(p.done)
}

// Status reports on a job: running while its process lives, then success
// iff it exited 0 (not killed, not timed out).
func (s *Service) Status(ctx context.Context, w *schema.Workflow, externalID string) (external.Status, error) {
	dir, err := s.jobDir(externalID)
	if err != nil {
		return external.Status{}, err
	}
	s.mu.Lock()
	rec, unrecorded := s.unrecorded[externalID]
	s.mu.Unlock()
	if unrecorded {
		if err := writeJSON(dir, "exit.json", rec); err == nil {
			s.mu.Lock()
			delete(s.unrecorded, externalID)
			s.mu.Unlock()
		}
		return external.Status{Success: rec.success(), Detail: rec.detail()}, nil
	}
	if rec, ok, err := readExit(dir); err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	} else if ok {
		return external.Status{Success: rec.success(), Detail: rec.detail()}, nil
	}
	s.mu.Lock()
	_, mine := s.procs[externalID]
	s.mu.Unlock()
	if mine {
		return external.Status{Running: true, Detail: "running"}, nil
	}
	job, err := readJob(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return external.Status{}, fmt.Errorf("command service: no job %s", externalID)
		}
		// Created but never started: the server stopped in between.
		return external.Status{Detail: "never started (celos stopped while starting it)"}, nil
	}
	if err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	// Re-check exit.json: the supervisor may have written it since.
	if rec, ok, _ := readExit(dir); ok {
		return external.Status{Success: rec.success(), Detail: rec.detail()}, nil
	}
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

// Kill stops a job's process group. Killing a finished job is not an error.
func (s *Service) Kill(ctx context.Context, w *schema.Workflow, externalID string) error {
	dir, err := s.jobDir(externalID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	p, mine := s.procs[externalID]
	if mine {
		p.killed = true
	}
	_, ended := s.unrecorded[externalID]
	s.mu.Unlock()
	if ended { // it ended; Status records how
		return nil
	}
	if mine {
		killGroup(p.cmd.Process.Pid)
		select {
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
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
	if alive(job, externalID) {
		killJob(job, externalID)
	} else {
		// The job's process ended while celos was down; children it left
		// (found by their environment, never by a PID that may be reused)
		// are stopped too.
		killByExternalID(externalID)
	}
	return writeJSON(dir, "exit.json", ExitRecord{ExitCode: -1, Killed: true, Finished: s.now().UTC()})
}

// Recover finds the newest job of slot id started at or after since (see
// external.Recoverer).
func (s *Service) Recover(ctx context.Context, w *schema.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, id.Workflow))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	best, bestStart := "", int64(-1)
	want := id.Time.UTC().Format(slotLayout)
	for _, e := range entries {
		t, started, err := parseJobName(e.Name())
		if err != nil || t.Format(slotLayout) != want || started < since.UnixNano() {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.dir, id.Workflow, e.Name(), "job.json")); err != nil {
			continue
		}
		if started > bestStart {
			best, bestStart = e.Name(), started
		}
	}
	if best == "" {
		return "", false, nil
	}
	return id.Workflow + "@" + best, true, nil
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
		if !wf.IsDir() || !schema.IDPattern.MatchString(wf.Name()) {
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
// one: this process is not running it and no process of it is alive (it
// ended while celos was down, or never started). Its status is "exit status
// unknown" for good, so Prune may remove it like an ended one.
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
	return !alive(job, externalID) && len(findByExternalID(externalID)) == 0
}

// Wait blocks until every job started by this Service has ended and been
// recorded, or ctx is done (for tests and shutdown).
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
