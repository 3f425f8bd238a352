package cmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the testscript commands beyond the built-in ones.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"waitserver": cmdWaitServer,
	"stepuntil":  cmdStepUntil,
	"mkfifo":     cmdMkfifo,
	"waitfile":   cmdWaitFile,
	"gone":       cmdGone,
}

// gone PIDFILE: every process whose PID is a line of PIDFILE has ended
// (waited for within a bound: an orphan killed by celos is reaped by init
// after celos exits). Those still running are killed when the script ends.
func cmdGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: gone PIDFILE")
	}
	var pids []int
	for _, f := range strings.Fields(ts.ReadFile(args[0])) {
		pid, err := strconv.Atoi(f)
		ts.Check(err)
		pids = append(pids, pid)
		ts.Defer(func() { syscall.Kill(pid, syscall.SIGKILL) })
	}
	if len(pids) == 0 {
		ts.Fatalf("%s lists no process", args[0])
	}
	for deadline := time.Now().Add(serverWait); ; time.Sleep(20 * time.Millisecond) {
		var alive []int
		for _, pid := range pids {
			if data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !strings.Contains(string(data), ") Z ") {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("processes %v still run after %v", alive, serverWait)
		}
	}
}

// waitfile PATH: wait until PATH exists (a background job's sign that it
// started); a bound against hanging, not a timing assertion.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile PATH")
	}
	for deadline := time.Now().Add(serverWait); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no %s after %v", args[0], serverWait)
		}
	}
}

// mkfifo PATH: make a named pipe (hostile-input scripts).
func cmdMkfifo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mkfifo PATH")
	}
	ts.Check(syscall.Mkfifo(ts.MkAbs(args[0]), 0o644))
}

// serverWait bounds how long the helpers wait for a server; it is a bound
// against hanging, not a timing assertion.
const serverWait = 2 * time.Minute

// waitserver FILE: wait until a `celos server --url-file FILE` started in
// the background listens, and point CELOS_SERVER at it (and SERVER_PORT at
// its port).
func cmdWaitServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitserver URLFILE")
	}
	path := ts.MkAbs(args[0])
	for deadline := time.Now().Add(serverWait); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			u := strings.TrimSpace(string(b))
			if resp, err := http.Get(u + "/healthz"); err == nil {
				resp.Body.Close()
				ts.Setenv("CELOS_SERVER", u)
				if i := strings.LastIndex(u, ":"); i >= 0 {
					ts.Setenv("SERVER_PORT", u[i+1:])
				}
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no server at %s after %v", path, serverWait)
		}
	}
}

// stepuntil WORKFLOW SLOT_TIME STEP_TIME STATUS: POST /scheduler?time=STEP_TIME
// until the slot's stored status is STATUS (a local command finishes
// between steps, so how many steps that takes is not fixed).
func cmdStepUntil(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: stepuntil WORKFLOW SLOT_TIME STEP_TIME STATUS")
	}
	base := ts.Getenv("CELOS_SERVER")
	last := ""
	for deadline := time.Now().Add(serverWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Post(base+"/scheduler?time="+url.QueryEscape(args[2]), "", nil)
		ts.Check(err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		resp, err = http.Get(base + "/slot-state?" + url.Values{"id": {args[0]}, "time": {args[1]}}.Encode())
		ts.Check(err)
		var s struct{ Status string }
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err == nil && resp.StatusCode == 200 {
			last = s.Status
			if s.Status == args[3] {
				return
			}
		}
	}
	ts.Fatalf("%s@%s is %s, not %s, after stepping for %v", args[0], args[1], last, args[3], serverWait)
}
