package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
	"github.com/celos-go/celos/targets"
)

// waitingProject's one job touches $STARTED/<case> (the last part of its prefix), then waits until
// $RELEASE exists: a run that is live for as long as the test wants.
func waitingProject() *workflow.Project {
	w := fixture.Hourly("wait")
	w.ExternalService = fixture.Command("sh", "-c", `mkdir -p "$CELOS_HDFS_PREFIX/out"; touch "$STARTED/${CELOS_HDFS_PREFIX##*/}"; while [ ! -e "$RELEASE" ]; do sleep 0.05; done`)
	return fixture.Project("p", w)
}

func waitingCase(name string) testcase.Case {
	return testcase.Case{Name: name, Start: day.Add(10 * time.Hour), End: day.Add(10*time.Hour + 30*time.Minute), Timeout: 10 * time.Minute,
		Outputs: []testcase.Output{{Path: "/out", Comparer: testcase.Comparer{Type: "plain"}, Files: map[string]string{}}}}
}

// waitFor polls for path (a bound against hanging, not a timing
// assertion).
func waitFor(t *testing.T, path string, p *child.Process) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if p != nil {
			if done, err := p.Exited(); done {
				t.Fatalf("the child ended (%v) before %s existed:\n%s", err, path, p.Output())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 2m", path)
		}
	}
}

// runDirs lists the entries of dir named celos-test-*.
func runDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "celos-test-") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// TestRunRemovesTheSandboxesOfKilledRuns: a run killed with kill -9
// (in a child process) leaves its sandbox; the next run in the same
// temporary directory removes it — and only it: not the sandbox of a run
// that is live at the same time (which then passes and cleans up), not
// a kept sandbox, not a directory that is no sandbox, not a symbolic link
// named like one, and nothing a link in the dead sandbox points to.
func TestRunRemovesTheSandboxesOfKilledRuns(t *testing.T) {
	if child.Is(t) {
		dir := os.Getenv("SANDBOX_TEST_TMP")
		child.Start(t, 2<<30, func() error {
			_, err := Run(context.Background(), Options{Project: waitingProject(), TempDir: dir}, []testcase.Case{waitingCase("killed")})
			return err
		})
		return
	}
	tmp, marks, outside := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("SANDBOX_TEST_TMP", tmp)
	t.Setenv("STARTED", marks)
	t.Setenv("RELEASE", filepath.Join(marks, "release"))

	// A live run, waiting for RELEASE, and a kept sandbox.
	live := make(chan []Result, 1)
	go func() {
		res, err := Run(context.Background(), Options{Project: waitingProject(), TempDir: tmp}, []testcase.Case{waitingCase("live")})
		if err != nil {
			t.Error(err)
		}
		live <- res
	}()
	waitFor(t, filepath.Join(marks, "live"), nil)
	kept, err := Run(context.Background(), Options{Project: copyProject(), TempDir: tmp, Keep: true}, []testcase.Case{okCase("kept")})
	if err != nil || !kept[0].Passed {
		t.Fatalf("the kept run: %v %+v", err, kept)
	}
	others := runDirs(t, tmp)

	// A run killed with kill -9 while its job runs.
	killed := child.Start(t, 2<<30, nil)
	waitFor(t, filepath.Join(marks, "killed"), killed)
	killed.Kill()
	var dead string
	for _, d := range runDirs(t, tmp) {
		if !slices.Contains(others, d) {
			dead = d
		}
	}
	if dead == "" {
		t.Fatalf("the killed run left no directory in %s", tmp)
	}
	// A link in the dead sandbox to a directory outside it, a directory
	// that is no sandbox, and a link named like a sandbox to the dead one.
	keepMe := filepath.Join(outside, "precious")
	if err := os.WriteFile(keepMe, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(tmp, dead, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tmp, "celos-test-not-a-sandbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(tmp, dead), filepath.Join(tmp, "celos-test-link")); err != nil {
		t.Fatal(err)
	}
	before := runDirs(t, tmp)

	// The killed run's job supervisors kill its command and end; until
	// they have, and while a process it left works in it, its sandbox is
	// left.
	waitGone(t, filepath.Join(tmp, dead))
	sleeper := exec.Command("sleep", "600")
	sleeper.Dir = filepath.Join(tmp, dead)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill() })
	told, err := nextRun(t, tmp)
	if len(told) != 0 || err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s, the sandbox of a killed run, is left: process %d still uses it", filepath.Join(tmp, dead), sleeper.Process.Pid)) {
		t.Errorf("a run while a process works in the killed run's sandbox removed %v, said %v", told, err)
	}
	if diff := cmp.Diff(before, runDirs(t, tmp)); diff != "" {
		t.Errorf("after that run (-want +got):\n%s", diff)
	}
	sleeper.Process.Kill()
	sleeper.Wait()

	// Then the next run removes it.
	told, err = nextRun(t, tmp)
	if err != nil {
		t.Errorf("removing the dead sandboxes: %v", err)
	}
	if diff := cmp.Diff([]Stale{{Local: filepath.Join(tmp, dead)}}, told); diff != "" {
		t.Errorf("what the next run was told it removed (-want +got):\n%s", diff)
	}
	var want []string
	for _, d := range before {
		if d != dead {
			want = append(want, d)
		}
	}
	if diff := cmp.Diff(want, runDirs(t, tmp)); diff != "" {
		t.Errorf("after the next run (-want +got; %s was the killed run's):\n%s", dead, diff)
	}
	if _, err := os.Stat(keepMe); err != nil {
		t.Errorf("a file the dead sandbox linked to: %v", err)
	}
	if _, err := os.Stat(filepath.FromSlash(kept[0].Prefix)); err != nil {
		t.Errorf("the kept sandbox: %v", err)
	}

	// The live run was left alone: it ends as it would have.
	if err := os.WriteFile(filepath.Join(marks, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-live
	if len(r) != 1 || !r[0].Passed {
		t.Fatalf("the live run: %+v", r)
	}
}

// nextRun runs a passing case in tmp and returns what it was told about
// the sandboxes of killed runs.
func nextRun(t *testing.T, tmp string) ([]Stale, error) {
	t.Helper()
	var told []Stale
	var tellErr error
	res, err := Run(context.Background(), Options{Project: copyProject(), TempDir: tmp, Stale: func(removed []Stale, err error) {
		told, tellErr = removed, err
	}}, []testcase.Case{okCase("next")})
	if err != nil || !res[0].Passed {
		t.Fatalf("the next run: %v %+v", err, res)
	}
	return told, tellErr
}

// waitGone waits until no process with a case prefix under dir in its
// environment (the jobs' supervisors and commands) runs; a bound against
// hanging, not a timing assertion.
func waitGone(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		procs, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatal(err)
		}
		var live []int
		for _, e := range procs {
			if pid, err := strconv.Atoi(e.Name()); err == nil && ofRun(pid, dir) {
				live = append(live, pid)
			}
		}
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the killed run still run after 2m", live)
		}
	}
}

// otherFS is the local disk under another name, as another HDFS would be.
type otherFS struct{ targets.Local }

func (otherFS) String() string { return "hdfs://elsewhere:8020" }

// TestRunRemovesTheRemoteSandboxOfAKilledRun: a killed run whose sandbox
// was on a file system of its own (Env.Base; HDFS with --hdfs) leaves it
// for a run on another file system, and the next run on the same one
// removes it with the local directory.
func TestRunRemovesTheRemoteSandboxOfAKilledRun(t *testing.T) {
	if child.Is(t) {
		child.Start(t, 2<<30, func() error {
			_, err := Run(context.Background(), Options{Project: waitingProject(), TempDir: os.Getenv("SANDBOX_TEST_TMP"),
				Env: Env{Base: os.Getenv("SANDBOX_TEST_BASE")}}, []testcase.Case{waitingCase("killed")})
			return err
		})
		return
	}
	tmp, base, marks := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("SANDBOX_TEST_TMP", tmp)
	t.Setenv("SANDBOX_TEST_BASE", base)
	t.Setenv("STARTED", marks)
	t.Setenv("RELEASE", filepath.Join(marks, "release"))
	killed := child.Start(t, 2<<30, nil)
	waitFor(t, filepath.Join(marks, "killed"), killed)
	killed.Kill()
	locals, remotes := runDirs(t, tmp), runDirs(t, base)
	if len(locals) != 1 || len(remotes) != 1 {
		t.Fatalf("the killed run left %q and %q, want one directory in each", locals, remotes)
	}
	waitGone(t, base)

	var told []Stale
	var tellErr error
	tell := func(removed []Stale, err error) { told, tellErr = removed, err }
	res, err := Run(context.Background(), Options{Project: copyProject(), TempDir: tmp, Stale: tell,
		Env: Env{FS: otherFS{}, FSURI: "file:///", Base: t.TempDir()}}, []testcase.Case{okCase("elsewhere")})
	if err != nil || !res[0].Passed || told != nil || tellErr != nil {
		t.Fatalf("the run on another file system: %v %+v; removed %v, %v", err, res, told, tellErr)
	}
	if diff := cmp.Diff(locals, runDirs(t, tmp)); diff != "" {
		t.Errorf("after the run on another file system (-want +got):\n%s", diff)
	}

	res, err = Run(context.Background(), Options{Project: copyProject(), TempDir: tmp, Stale: tell,
		Env: Env{Base: base}}, []testcase.Case{okCase("same")})
	if err != nil || !res[0].Passed || tellErr != nil {
		t.Fatalf("the run on the same file system: %v %+v; %v", err, res, tellErr)
	}
	want := []Stale{{Local: filepath.Join(tmp, locals[0]), Remote: "file://" + filepath.Join(base, remotes[0])}}
	if diff := cmp.Diff(want, told); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if left := append(runDirs(t, tmp), runDirs(t, base)...); len(left) > 0 {
		t.Errorf("left: %q", left)
	}
}
