package command

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/celos-go/celos/internal/atomicfile"
)

// supervisorArg0 is argv[0] of a job's supervisor: the running executable
// (/proc/self/exe) started again, in a session of its own, with the job's
// directory as its only argument. Any binary that links this package (the
// celos binary, a test binary) turns into the supervisor in init, before
// its main runs.
const supervisorArg0 = "celos-command-supervisor"

// killSignal is what the server sends a supervisor to kill its job (the
// kill is then recorded as "killed"). SIGTERM, SIGINT and SIGHUP, which a
// service manager or a terminal may send to everything celos started, do
// not stop the supervisor: the job's command gets its own signals and the
// supervisor records what they did.
const killSignal = syscall.SIGUSR1

func init() {
	if os.Args[0] == supervisorArg0 && (len(os.Args) == 2 || len(os.Args) == 3 && os.Args[2] == tiedArg) {
		// Named "celos-job" in ps -e and top (not "exe"); init runs on
		// the main thread, whose name is the process's.
		name := []byte("celos-job\x00")
		syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0)
		os.Exit(supervise(os.Args[1], len(os.Args) == 3))
	}
}

// claimRecord is claim.json: whether the job's command runs. It is created
// once (link(2) of a complete temporary file, so it exists whole or not at
// all) by whichever comes first: the supervisor, just before it starts the
// command (Run), or a server abandoning a job whose supervisor has not
// claimed it (!Run, after a crash between job.json and the start). The
// loser reads the winner's claim: a job runs at most once, and a job
// abandoned never runs.
type claimRecord struct {
	Run    bool      `json:"run"`
	PID    int       `json:"supervisorPid,omitempty"`
	Boot   uint64    `json:"procStartTime,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
}

// claim makes rec the job's claim unless it has one; it returns the claim
// that holds and whether it is rec.
func claim(dir string, rec claimRecord) (claimRecord, bool, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return claimRecord{}, false, err
	}
	final := filepath.Join(dir, "claim.json")
	f, err := os.CreateTemp(dir, atomicfile.TempPrefix+"claim-*")
	if err != nil {
		return claimRecord{}, false, fmt.Errorf("claim %s: %w", final, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return claimRecord{}, false, fmt.Errorf("claim %s: %w", final, err)
	}
	if err := os.Link(tmp, final); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return claimRecord{}, false, fmt.Errorf("claim %s: %w", final, err)
		}
		held, ok, err := readClaim(dir)
		if err != nil {
			return claimRecord{}, false, err
		}
		if !ok {
			return claimRecord{}, false, fmt.Errorf("claim %s: exists and does not", final)
		}
		return held, false, nil
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return claimRecord{}, false, fmt.Errorf("claim %s: sync %s: %w", final, dir, err)
	}
	return rec, true, nil
}

func readClaim(dir string) (claimRecord, bool, error) {
	var r claimRecord
	p := filepath.Join(dir, "claim.json")
	data, err := readRecord(dir, "claim.json")
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, false, fmt.Errorf("%s: not a claim record: %v", p, err)
	}
	return r, true, nil
}

// supervise is the supervisor process: claim the job, start its command
// in a process group of its own, report to the server on fd 3, enforce the
// timeout, kill the command's group on killSignal, wait for it and record
// how it ended in exit.json. Its stdout and stderr are the job's
// output.log (its own messages start with "celos:"). A tied job's
// supervisor (tied.go) also kills the command and everything it started
// when its lifeline is cut, and stays until nothing the command started
// runs.
func supervise(dir string, tied bool) int {
	syscall.CloseOnExec(3) // the command must not hold the report pipe
	report := os.NewFile(3, "report")
	sigs := make(chan os.Signal, 4)
	// Before the claim, which publishes this PID: a kill request that
	// arrives early is not fatal.
	signal.Notify(sigs, killSignal, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	var cut <-chan struct{}
	if tied {
		var err error
		if cut, err = tie(); err != nil {
			fmt.Fprintf(os.Stderr, "celos: job supervisor: %v\n", err)
			fmt.Fprintf(report, "error %v\n", err)
			return 2
		}
	}
	code, killedGroup := runJob(dir, report, sigs, cut)
	if tied {
		afterCommand(dir, cut, killedGroup, func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "celos: "+format+"\n", args...)
		})
	}
	return code
}

// afterWait, if set, runs in runJob between the command's Wait returning
// and the timeout being disarmed (tests use it to widen that window).
var afterWait func()

// runJob runs the job; a cut lifeline (cut closed; nil: never) kills it
// as killSignal does. It returns the supervisor's exit code and, if it
// killed the command's process group, the group's ID.
func runJob(dir string, report io.WriteCloser, sigs <-chan os.Signal, cut <-chan struct{}) (code, killedGroup int) {
	defer report.Close()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "celos: "+format+"\n", args...)
	}
	job, err := readJob(dir)
	if err != nil {
		logf("job supervisor: %v", err)
		fmt.Fprintf(report, "error %v\n", err)
		return 2, 0
	}
	self := os.Getpid()
	c, _, err := claim(dir, claimRecord{Run: true, PID: self, Boot: procStartTime(self), Time: time.Now().UTC()})
	if err != nil {
		logf("job supervisor: %v", err)
		fmt.Fprintf(report, "error %v\n", err)
		return 2, 0
	}
	if !c.Run {
		logf("not started: the job was abandoned before its supervisor claimed it (%s)", c.Reason)
		fmt.Fprintln(report, "abandoned")
		return 0, 0
	}
	if len(job.Argv) == 0 {
		job.Argv = []string{""}
	}
	cmd := exec.Command(job.Argv[0], job.Argv[1:]...)
	cmd.Dir = job.Dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf("cannot start %q: %v", job.Argv[0], err)
		recordExit(dir, ExitRecord{ExitCode: -1, Error: "cannot start: " + err.Error(), Finished: time.Now().UTC()}, logf)
		fmt.Fprintln(report, "ended")
		return 0, 0
	}
	pid := cmd.Process.Pid
	fmt.Fprintf(report, "started %d\n", pid)
	report.Close()

	var mu sync.Mutex
	exited, killed, timedOut := false, false, false
	killIf := func(flag *bool) {
		mu.Lock()
		defer mu.Unlock()
		if exited {
			return // it ended in time; its PID may be reused already
		}
		*flag = true
		killGroup(pid)
	}
	var timer *time.Timer
	if job.Timeout > 0 {
		deadline := job.Started.Add(time.Duration(job.Timeout) * time.Second)
		timer = time.AfterFunc(time.Until(deadline), func() { killIf(&timedOut) })
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if afterWait != nil {
			afterWait()
		}
		mu.Lock()
		exited = true
		mu.Unlock()
		waited <- err
	}()
	var werr error
wait:
	for {
		select {
		case werr = <-waited:
			break wait
		case sig := <-sigs:
			if sig == killSignal {
				killIf(&killed)
			}
		case <-cut:
			cut = nil
			killIf(&killed)
		}
	}
	if timer != nil {
		timer.Stop()
	}
	mu.Lock()
	rec := ExitRecord{ExitCode: cmd.ProcessState.ExitCode(), TimedOut: timedOut, Killed: killed, Finished: time.Now().UTC()}
	if killed || timedOut {
		killedGroup = pid
	}
	mu.Unlock()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		rec.Signal = ws.Signal().String()
	} else {
		// It exited on its own: a kill that came after it had ended did
		// not end it.
		rec.TimedOut, rec.Killed = false, false
	}
	if werr != nil && rec.ExitCode == -1 && rec.Signal == "" {
		rec.Error = werr.Error()
	}
	recordExit(dir, rec, logf)
	return 0, killedGroup
}

// recordExit writes exit.json, retrying (the job is reported running
// meanwhile, never lost) until it is written or the job's directory is
// gone.
func recordExit(dir string, rec ExitRecord, logf func(string, ...any)) {
	delay := 50 * time.Millisecond
	for said := false; ; said = true {
		err := writeJSON(dir, "exit.json", rec)
		if err == nil {
			if said {
				logf("recorded how the job ended (%s)", rec.detail())
			}
			return
		}
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return
		}
		if !said {
			logf("cannot record how the job ended (%s), retrying: %v", rec.detail(), err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 5*time.Second)
	}
}

// readReport reads the supervisor's one-line report from r until deadline
// ("" if it closed the pipe without one or the deadline passed).
func readReport(r *os.File, deadline time.Time) string {
	if !deadline.IsZero() {
		r.SetReadDeadline(deadline)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return ""
	}
	return line[:len(line)-1]
}
