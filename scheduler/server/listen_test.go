package server

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRestartOnThePortOfAKilledServer: a server killed (kill -9) while a
// process it had just forked still held its listening socket (until that
// child execs, which closes it: O_CLOEXEC) left the port taken, and a
// restart at once on the same port and state directory failed ("the port
// is in use"). When the state directory's lock names a process that is
// gone, the restart now waits for the port (10 s at most).
func TestRestartOnThePortOfAKilledServer(t *testing.T) {
	dir := t.TempDir()
	wf, db := filepath.Join(dir, "wf"), filepath.Join(dir, "db")
	for _, d := range []string{wf, db} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The killed server: its lock file names it, and it is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(db, ".lock"), []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Its child holds the listening socket for a moment.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "2")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	f.Close()
	ln.Close()

	cfg := Config{Workflows: wf, DB: db, Port: port, URLFile: filepath.Join(dir, "url"), Stderr: os.Stderr}
	url, stop := startRun(t, cfg, openEngine)
	if want := "http://127.0.0.1:" + strconv.Itoa(port); url != want {
		t.Errorf("serving at %s, want %s", url, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestPortInUseByALiveServerIsRefusedAtOnce: a port another process holds
// while the state directory's lock names a live process (or none) is
// refused at once, as before.
func TestPortInUseByALiveServerIsRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	wf, db := filepath.Join(dir, "wf"), filepath.Join(dir, "db")
	os.Mkdir(wf, 0o755)
	os.Mkdir(db, 0o755)
	if err := os.WriteFile(filepath.Join(db, ".lock"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := Config{Workflows: wf, DB: db, Port: ln.Addr().(*net.TCPAddr).Port, Stderr: os.Stderr}
	start := time.Now()
	l, err := preflight(cfg.withDefaults())
	if err == nil {
		l.Close()
		t.Fatal("a port in use was taken")
	}
	if !strings.Contains(err.Error(), "the port is in use (another celos server?)") {
		t.Errorf("the error: %v", err)
	}
	// (A bound far above one listen call, far below the 10 s wait.)
	if took := time.Since(start); took > deadHolderPortWait/2 {
		t.Errorf("refused after %v: it waited for a live holder", took)
	}
}

// TestPortHeldPastTheWaitIsNamed: a dead server's port still held when
// the wait ends is refused naming the dead process and fuser.
func TestPortHeldPastTheWaitIsNamed(t *testing.T) {
	defer func(d time.Duration) { deadHolderPortWait = d }(deadHolderPortWait)
	deadHolderPortWait = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = listen("127.0.0.1", port, 4242)
	if err == nil || !strings.Contains(err.Error(), "(process 4242) has exited") || !strings.Contains(err.Error(), "fuser "+strconv.Itoa(port)+"/tcp") {
		t.Errorf("the error: %v", err)
	}
}
