package jvmproc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv"
	"github.com/celos-go/celos/internal/testenv/jvmproc"
)

var errUnavailable = errors.New("test helper unavailable")

// fakeHelper lays out a helper's target directory in a temp dir (named by
// CELOS_JVMPROC_TEST_DIR) and puts an executable "java" first on PATH.
func fakeHelper(t *testing.T) (jvmproc.Helper, string, string) {
	t.Helper()
	bin := t.TempDir()
	java := filepath.Join(bin, "java")
	if err := os.WriteFile(java, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	target := t.TempDir()
	t.Setenv("CELOS_JVMPROC_TEST_DIR", target)
	if err := os.MkdirAll(filepath.Join(target, "dependency"), 0o755); err != nil {
		t.Fatal(err)
	}
	return jvmproc.Helper{
		Name: "jvmproc-test", DirEnv: "CELOS_JVMPROC_TEST_DIR",
		Deps: "core-*.jar", What: "Core",
		Main: "celos.test.Main", Unavailable: errUnavailable, SkipEnv: "CELOS_SKIP_TEST",
	}, java, target
}

func touch(t *testing.T, path string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// TestCommandMissing: each missing part gives an error wrapping
// Unavailable that names it and tells the user to run `make deps` or set
// the skip variable.
func TestCommandMissing(t *testing.T) {
	t.Run("java", func(t *testing.T) {
		h, _, _ := fakeHelper(t)
		t.Setenv("PATH", t.TempDir())
		_, _, err := h.Command()
		want := "test helper unavailable: java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless) and run `make deps`, or set CELOS_SKIP_TEST=1"
		if !errors.Is(err, errUnavailable) || err.Error() != want {
			t.Errorf("Command() error = %v, want %q wrapping Unavailable", err, want)
		}
	})
	t.Run("jar", func(t *testing.T) {
		h, _, target := fakeHelper(t)
		_, _, err := h.Command()
		want := "test helper unavailable: " + filepath.Join(target, "jvmproc-test.jar") + " missing: run `make deps` (scripts/test-deps.sh builds it with Maven), or set CELOS_SKIP_TEST=1"
		if !errors.Is(err, errUnavailable) || err.Error() != want {
			t.Errorf("Command() error = %v, want %q wrapping Unavailable", err, want)
		}
	})
	t.Run("deps", func(t *testing.T) {
		h, _, target := fakeHelper(t)
		touch(t, filepath.Join(target, "jvmproc-test.jar"), time.Now())
		touch(t, filepath.Join(target, "dependency", "other-1.jar"), time.Now())
		_, _, err := h.Command()
		want := "test helper unavailable: no Core jars in " + filepath.Join(target, "dependency") + ": run `make deps`, or set CELOS_SKIP_TEST=1"
		if !errors.Is(err, errUnavailable) || err.Error() != want {
			t.Errorf("Command() error = %v, want %q wrapping Unavailable", err, want)
		}
	})
}

// TestCommandArchive: the class-data-sharing archive is used only when it
// is not older than the jar; the arguments are the JVM options file, the
// archive, the classpath and the main class.
func TestCommandArchive(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	jarTime := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		archive time.Duration // archive mtime relative to the jar's; 0: none
		useIt   bool
	}{
		{"none", 0, false},
		{"current", time.Minute, true},
		{"stale", -time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, wantJava, target := fakeHelper(t)
			jar := filepath.Join(target, "jvmproc-test.jar")
			touch(t, jar, jarTime)
			touch(t, filepath.Join(target, "dependency", "core-1.0.jar"), jarTime)
			if tc.archive != 0 {
				touch(t, filepath.Join(target, "jvmproc-test.jsa"), jarTime.Add(tc.archive))
			}
			java, args, err := h.Command()
			if err != nil {
				t.Fatal(err)
			}
			if java != wantJava {
				t.Errorf("java = %s, want %s", java, wantJava)
			}
			want := []string{"@" + filepath.Join(root, "testdata", "jvmproc-test", "jvm.options")}
			if tc.useIt {
				want = append(want, "-XX:SharedArchiveFile="+filepath.Join(target, "jvmproc-test.jsa"))
			}
			want = append(want, "-cp", jar+":"+filepath.Join(target, "dependency", "*"), "celos.test.Main")
			if d := cmp.Diff(want, args); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
		})
	}
}

// start runs script with /bin/sh as the "JVM", its log in a temp dir.
func start(t *testing.T, script string) (*jvmproc.Proc, string) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "console.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	p, err := jvmproc.Start("/bin/sh", []string{"-c", script}, dir, log, "helper stdout: ")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p, logPath
}

func reply(t *testing.T, p *jvmproc.Proc) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.Reply(ctx)
}

// waitFor polls the file at path until it contains s.
func waitFor(t *testing.T, path, s string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), s) {
			return
		}
	}
	t.Fatalf("%s never got %q; it has:\n%s", path, s, jvmproc.Tail(path, 20))
}

// TestProtocol: READY, OK and ERR lines are replies (other output is only
// logged), commands reach the JVM's stdin, and once it exits Reply says
// "java exited" with the status.
func TestProtocol(t *testing.T) {
	p, logPath := start(t, `echo starting; echo "READY 127.0.0.1:1"; echo oops >&2
read l; echo "OK $l"; read l; echo "ERR $l failed"; read l; exit 3`)
	var got []string
	line, err := reply(t, p)
	got = append(got, line)
	for _, cmd := range []string{"ping", "stop-namenode"} {
		if err == nil {
			err = p.Send(cmd)
		}
		if err == nil {
			line, err = reply(t, p)
			got = append(got, line)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"READY 127.0.0.1:1", "OK ping", "ERR stop-namenode failed"}, got); d != "" {
		t.Errorf("replies (-want +got):\n%s", d)
	}
	if err := p.Send("bye"); err != nil {
		t.Fatal(err)
	}
	if _, err := reply(t, p); err == nil || err.Error() != "java exited: exit status 3" {
		t.Errorf("Reply after exit: %v, want java exited: exit status 3", err)
	}
	<-p.Exited()
	if err := p.ExitError(); err.Error() != "java exited: exit status 3" {
		t.Errorf("ExitError() = %v", err)
	}
	waitFor(t, logPath, "helper stdout: starting\n")
	waitFor(t, logPath, "oops\n")
	waitFor(t, logPath, "helper stdout: OK ping\n")
}

// TestLastReplyBeforeExit: a reply printed just before the JVM exits (an
// "ERR start") is returned, not lost to the exit.
func TestLastReplyBeforeExit(t *testing.T) {
	for i := 0; i < 20; i++ {
		p, _ := start(t, `echo "ERR start cannot bind"; exit 1`)
		if line, err := reply(t, p); line != "ERR start cannot bind" {
			t.Fatalf("run %d: Reply = %q, %v; want the ERR line", i, line, err)
		}
	}
}

// TestUnreadRepliesDoNotBlock: replies nobody reads (more than fit in the
// queue) do not stall the JVM's output.
func TestUnreadRepliesDoNotBlock(t *testing.T) {
	p, logPath := start(t, `i=0; while [ $i -lt 100 ]; do echo "OK $i"; i=$((i+1)); done; echo done; read l`)
	waitFor(t, logPath, "helper stdout: done\n")
	if line, err := reply(t, p); line != "OK 0" {
		t.Errorf("first reply = %q, %v; want OK 0", line, err)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie ("pid (comm) Z ...") has exited; no reaper may collect a
	// reparented one in a container.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// childPID starts a JVM that forks a long sleep (as Hadoop forks helpers)
// and returns the sleep's pid, from its READY line.
func childPID(t *testing.T, script string) (*jvmproc.Proc, int) {
	t.Helper()
	p, _ := start(t, `sleep 300 & echo "READY $!"; `+script)
	line, err := reply(t, p)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "READY "))
	if err != nil || !alive(pid) {
		t.Fatalf("READY line %q: no live child (%v)", line, err)
	}
	return p, pid
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
	}
}

// TestKillGroup: Kill takes the JVM and what it forked, and waits for the
// JVM to exit.
func TestKillGroup(t *testing.T) {
	p, child := childPID(t, "wait")
	p.Kill()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Kill returned before the JVM exited")
	}
	if err := p.ExitError(); err.Error() != "java exited: signal: killed" {
		t.Errorf("ExitError() = %v", err)
	}
	if alive(p.PID()) {
		t.Errorf("the JVM %d still runs", p.PID())
	}
	waitGone(t, child)
}

// TestShutdownOnEOF: a JVM that exits on EOF on its stdin is not killed,
// and its exit status is returned.
func TestShutdownOnEOF(t *testing.T) {
	p, _ := start(t, `read l; exit 4`)
	killed, err := p.Shutdown(time.Minute)
	if killed || err == nil || err.Error() != "exit status 4" {
		t.Errorf("Shutdown = %v, %v; want not killed, exit status 4", killed, err)
	}
}

// TestShutdownThawsFrozen: a JVM stopped with SIGSTOP is resumed first, so
// it can see EOF and exit by itself.
func TestShutdownThawsFrozen(t *testing.T) {
	p, _ := start(t, `read l; exit 0`)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if killed, err := p.Shutdown(time.Minute); killed || err != nil {
		t.Errorf("Shutdown of a frozen JVM = %v, %v; want a clean exit", killed, err)
	}
}

// TestShutdownKillsHung: a JVM that ignores EOF is killed after the grace
// period, with what it forked.
func TestShutdownKillsHung(t *testing.T) {
	p, child := childPID(t, "trap '' TERM HUP; while :; do sleep 1; done")
	killed, err := p.Shutdown(100 * time.Millisecond)
	if !killed || err != nil {
		t.Errorf("Shutdown = %v, %v; want killed", killed, err)
	}
	waitGone(t, child)
}

// TestStartNoBinary: a java that cannot be run is an error at Start.
func TestStartNoBinary(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	_, err = jvmproc.Start("/nonexistent/java", nil, t.TempDir(), log, "")
	if err == nil || !strings.HasPrefix(err.Error(), "start java: ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start = %v, want start java: ... not exist", err)
	}
}

// TestReady: the READY reply, then the JSON file the JVM wrote; each way
// of failing names the helper or the file.
func TestReady(t *testing.T) {
	type info struct{ URL string }
	for _, tc := range []struct {
		name, script, json string
		want               info
		wantErr            string
	}{
		{"ok", `echo "READY http://x"; read l`, `{"URL":"http://x"}`, info{"http://x"}, ""},
		{"err", `echo "ERR start: java.net.BindException"; read l`, "", info{}, `Oozie said "ERR start: java.net.BindException", want READY`},
		{"exit", `exit 2`, "", info{}, "Oozie did not start: java exited: exit status 2"},
		{"no file", `echo "READY http://x"; read l`, "", info{}, "oozie.json: open "},
		{"bad file", `echo "READY http://x"; read l`, `{"URL":`, info{}, "oozie.json: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := start(t, tc.script)
			path := filepath.Join(t.TempDir(), "oozie.json")
			if tc.json != "" {
				if err := os.WriteFile(path, []byte(tc.json), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var got info
			err := p.Ready(ctx, "Oozie", path, &got)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)) {
				t.Fatalf("Ready = %v, want %q", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("info (-want +got):\n%s", d)
			}
		})
	}
}

// TestReadyHung: a JVM that never answers is given up on at the deadline.
func TestReadyHung(t *testing.T) {
	p, _ := start(t, `read l`)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := p.Ready(ctx, "mini cluster", filepath.Join(t.TempDir(), "cluster.json"), &struct{}{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "mini cluster did not start: ") {
		t.Errorf("Ready = %v, want mini cluster did not start: deadline exceeded", err)
	}
}

// TestWorkDir: a given directory is made and kept; a temporary one is
// removed, unless CELOS_KEEP_TESTENV=1.
func TestWorkDir(t *testing.T) {
	given := filepath.Join(t.TempDir(), "a", "b")
	dir, own, err := jvmproc.WorkDir(given, "celos-jvmproc-")
	if err != nil || dir != given || own {
		t.Fatalf("WorkDir(%s) = %s, %v, %v", given, dir, own, err)
	}
	jvmproc.RemoveWorkDir(dir, own)
	if _, err := os.Stat(given); err != nil {
		t.Errorf("a given directory was not made or not kept: %v", err)
	}
	for keep, wantGone := range map[string]bool{"": true, "1": false} {
		t.Setenv("CELOS_KEEP_TESTENV", keep)
		dir, own, err := jvmproc.WorkDir("", "celos-jvmproc-")
		if err != nil || !own || !strings.HasPrefix(filepath.Base(dir), "celos-jvmproc-") {
			t.Fatalf("WorkDir(\"\") = %s, %v, %v", dir, own, err)
		}
		jvmproc.RemoveWorkDir(dir, own)
		_, err = os.Stat(dir)
		if gone := errors.Is(err, os.ErrNotExist); gone != wantGone {
			t.Errorf("CELOS_KEEP_TESTENV=%q: removed = %v, want %v", keep, gone, wantGone)
		}
		os.RemoveAll(dir)
	}
}

// TestTail: the last n lines, all of a shorter file, or the read error.
func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{2: "b\nc", 5: "a\nb\nc"} {
		if got := jvmproc.Tail(path, n); got != want {
			t.Errorf("Tail(%d) = %q, want %q", n, got, want)
		}
	}
	if got := jvmproc.Tail(path+".missing", 2); !strings.Contains(got, "no such file") {
		t.Errorf("Tail(missing) = %q", got)
	}
}
