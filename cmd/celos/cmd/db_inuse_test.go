package cmd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/slot"
)

// TestDBCopyAfterAServerWasKilled: a celos server on the database killed
// with kill -9 never leaves, so migrate and export refuse the database
// until its lease ends. The refusal must tell the user which instance
// (id, host, pid), when its lease ends, and how to go on (wait until
// then, or start it again under its id and stop it): it said only
// "stop them first", of a server already gone. Nothing is copied.
func TestDBCopyAfterAServerWasKilled(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "wf")
	if err := os.Mkdir(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	url := filepath.Join(dir, "url")
	server := exec.Command(os.Args[0], "server", "--port", "0", "--workflows", wf, "--db", dsn, "--logs", "",
		"--jobs", filepath.Join(dir, "jobs"), "--url-file", url, "--instance-id", "sched-9", "--lease", "10m")
	server.Args[0] = "celos" // testscript.Main runs it as celos
	var serverOut bytes.Buffer
	server.Stdout, server.Stderr = &serverOut, &serverOut
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(url); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not start in 2 minutes:\n%s", serverOut.String())
		}
	}
	killed := time.Now()
	server.Process.Kill()
	server.Wait()

	src := writeSuccessState(t, 2, 2)
	for _, args := range [][]string{
		{"db", "migrate", "--from", src, "--to", dsn},
		{"db", "export", "--from", dsn, "--to", filepath.Join(dir, "out")},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != ExitFailure {
			t.Fatalf("celos %s after the server was killed: exit %d, want %d\n%s%s", pgtest.Redact(fmt.Sprint(args)), code, ExitFailure, out.String(), errOut.String())
		}
		msg := errOut.String()
		for _, want := range []string{
			"in use", "nothing copied", `instance "sched-9" on `, "pid " + strconv.Itoa(server.Process.Pid),
			"killed (kill -9)", "--instance-id",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("celos %v: the refusal does not say %q:\n%s", args[:2], want, msg)
			}
		}
		m := regexp.MustCompile(`lease ends at (\S+) \(in [^)]+\)`).FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("celos %v: the refusal does not say when the lease ends:\n%s", args[:2], msg)
		}
		ends, err := slot.ParseTime(m[1])
		if err != nil {
			t.Fatalf("lease end %q: %v", m[1], err)
		}
		// The last heartbeat was before the kill: the lease (10m) ends
		// within 10 minutes of it, and after it (with a bound for clock
		// steps between this process and the database).
		if ends.Before(killed.Add(5*time.Minute)) || ends.After(killed.Add(10*time.Minute+time.Second)) {
			t.Errorf("celos %v: lease ends at %s, want within the 10m after the kill at %s", args[:2], m[1], killed.UTC())
		}
		if !strings.Contains(msg, "run this again after "+m[1]) {
			t.Errorf("celos %v: the refusal does not say to run again after %s:\n%s", args[:2], m[1], msg)
		}
	}
	if n := countRows(t, dsn, "celos_slots"); n != 0 {
		t.Fatalf("migrate wrote %d slot rows into a database a killed server still holds", n)
	}
	if _, err := os.Lstat(filepath.Join(dir, "out")); err == nil {
		t.Errorf("the refused export created its directory")
	}
}
