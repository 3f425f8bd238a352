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
// its port). It fails at once when that server has exited.
func cmdWaitServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitserver URLFILE")
	}
	path := ts.MkAbs(args[0])
	for deadline := time.Now().Add(serverWait); ; time.Sleep(20 * time.Millisecond) {
		if exitedServer(ts, args[0]) {
			ts.Fatalf("the celos server started with --url-file %s exited before it listened (its output follows the script's)", args[0])
		}
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

// exitedServer reports whether the `celos server` started with --url-file
// urlFile (relative to the script's directory, as the server took it) has
// exited: TestMain's celos leaves urlFile+".exited" behind when it ends,
// and no child of this process with that flag still runs (the marker may
// be an earlier server's, the script reusing the file name).
func exitedServer(ts *testscript.TestScript, urlFile string) bool {
	if _, err := os.Stat(ts.MkAbs(urlFile) + ".exited"); err != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != me || f[0] == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if urlFileOf(strings.Split(string(cmdline), "\x00")) == urlFile {
			return false
		}
	}
	return true
}

// urlFileOf is the value of the --url-file flag in args ("": none).
func urlFileOf(args []string) string {
	for i, a := range args {
		if f, ok := strings.CutPrefix(a, "--url-file="); ok {
			return f
		}
		if a == "--url-file" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// markExit is what TestMain's celos does when Main returns: a server
// started with --url-file F leaves F.exited, for waitserver.
func markExit(args []string, code int) {
	if f := urlFileOf(args); f != "" {
		os.WriteFile(f+".exited", []byte(strconv.Itoa(code)+"\n"), 0o644)
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
