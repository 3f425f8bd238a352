package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
)

var day = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// copyProject is an hourly workflow that waits for /in/<hour>/_READY and
// copies /in/<hour>/data to /out/<hour>/data, upper-cased; and a daily one
// after it that counts the lines of the day.
func copyProject() *workflow.Project {
	cp := fixture.Hourly("copy")
	cp.Trigger = workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: "/in/${hour}/_READY"}
	cp.ExternalService = fixture.Command("sh", "-c", `mkdir -p "$CELOS_HDFS_PREFIX/out/${hour}" && tr a-z A-Z < "$CELOS_HDFS_PREFIX/in/${hour}/data" > "$CELOS_HDFS_PREFIX/out/${hour}/data"`)
	return fixture.Project("p", cp)
}

func inputs(hours ...string) []testcase.Input {
	var in []testcase.Input
	for _, h := range hours {
		in = append(in, testcase.Input{Path: "/in/" + h, Files: map[string]string{"_READY": "", "data": "hello " + h + "\n"}})
	}
	return in
}

func okCase(name string) testcase.Case {
	return testcase.Case{
		Name: name, Start: day.Add(10 * time.Hour), End: day.Add(12 * time.Hour), Timeout: time.Minute,
		Inputs: inputs("10", "11", "12"),
		Outputs: []testcase.Output{{Path: "/out", Comparer: testcase.Comparer{Type: "plain"}, Files: map[string]string{
			"10/data": "HELLO 10\n", "11/data": "HELLO 11\n", "12/data": "HELLO 12\n",
		}}},
	}
}

func run(t *testing.T, opts Options, cases ...testcase.Case) []Result {
	t.Helper()
	if opts.Project == nil {
		opts.Project = copyProject()
	}
	opts.TempDir = t.TempDir()
	res, err := Run(context.Background(), opts, cases)
	if err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, opts.TempDir, opts.Keep)
	return res
}

// assertEmpty checks that the run left nothing in its temporary directory.
func assertEmpty(t *testing.T, dir string, keep bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !keep && len(entries) > 0 {
		t.Errorf("the run left %d entries in %s (%s...)", len(entries), dir, entries[0].Name())
	}
}

func TestRunPasses(t *testing.T) {
	res := run(t, Options{}, okCase("ok"))
	r := res[0]
	if !r.Passed || len(r.Failures) > 0 {
		t.Fatalf("failed: %q", r.Failures)
	}
	want := []string{
		"2026-01-01T10:00:00Z  copy@2026-01-01T10:00:00.000Z WAITING → READY",
		"2026-01-01T10:00:00Z  copy@2026-01-01T10:00:00.000Z READY → RUNNING",
		"2026-01-01T10:00:00Z  copy@2026-01-01T10:00:00.000Z RUNNING → SUCCESS",
		"2026-01-01T11:00:00Z  copy@2026-01-01T11:00:00.000Z WAITING → READY",
		"2026-01-01T11:00:00Z  copy@2026-01-01T11:00:00.000Z READY → RUNNING",
		"2026-01-01T11:00:00Z  copy@2026-01-01T11:00:00.000Z RUNNING → SUCCESS",
		"2026-01-01T12:00:00Z  copy@2026-01-01T12:00:00.000Z WAITING → READY",
		"2026-01-01T12:00:00Z  copy@2026-01-01T12:00:00.000Z READY → RUNNING",
		"2026-01-01T12:00:00Z  copy@2026-01-01T12:00:00.000Z RUNNING → SUCCESS",
	}
	if diff := cmp.Diff(want, r.Log); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestRunFailures(t *testing.T) {
	wrong := okCase("wrong-output")
	wrong.Outputs[0].Files["11/data"] = "HELLO ELEVEN\n"
	missing := okCase("missing-output")
	missing.Outputs = append(missing.Outputs, testcase.Output{Path: "/nothing", Files: map[string]string{}, Comparer: testcase.Comparer{Type: "plain"}})
	extra := okCase("extra-file")
	delete(extra.Outputs[0].Files, "12/data")
	never := okCase("never-ready")
	never.Inputs = inputs("10", "11") // 12 never arrives
	res := run(t, Options{}, wrong, missing, extra, never)
	want := map[string][]string{
		"wrong-output": {"/out: 11/data: contents differ\n" +
			"    --- expected/11/data\n    +++ actual/11/data\n    @@ -1 +1 @@\n    -HELLO ELEVEN\n    +HELLO 11"},
		"missing-output": {"/nothing: missing (the workflows wrote nothing there)"},
		"extra-file": {
			"/out: 12: unexpected a directory in the output",
			"/out: 12/data: unexpected a file (9 bytes) in the output",
		},
		"never-ready": {
			"/out: 12: expected a directory, missing from the output",
			"/out: 12/data: expected a file (9 bytes), missing from the output",
			"slots that did not succeed:\n    copy@2026-01-01T12:00:00.000Z WAITING",
		},
	}
	for _, r := range res {
		if r.Passed {
			t.Errorf("%s passed", r.Name)
		}
		if diff := cmp.Diff(want[r.Name], r.Failures); diff != "" {
			t.Errorf("%s: failures (-want +got):\n%s", r.Name, diff)
		}
	}
}

func TestRunFailedCommandShowsItsOutput(t *testing.T) {
	p := copyProject()
	p.Workflows[0].ExternalService = fixture.Command("sh", "-c", "echo boom >&2; exit 3")
	res := run(t, Options{Project: p}, okCase("boom"))
	got := strings.Join(res[0].Failures, "\n")
	if !strings.Contains(got, "copy@2026-01-01T10:00:00.000Z FAILURE\n        | boom") {
		t.Errorf("failures do not show the command's output:\n%s", got)
	}
}

func TestRunTimeoutKillsAndCleansUp(t *testing.T) {
	p := copyProject()
	p.Workflows[0].ExternalService = fixture.Command("sleep", "600")
	c := okCase("slow")
	c.Timeout = 5 * time.Second // the job runs long before, even on a loaded machine
	started := time.Now()
	res := run(t, Options{Project: p}, c)
	if res[0].Passed || !strings.HasPrefix(res[0].Failures[0], "timed out after 5s (timeoutSeconds): copy@2026-01-01T10:00:00.000Z RUNNING") {
		t.Errorf("failures: %q", res[0].Failures)
	}
	if d := time.Since(started); d > time.Minute {
		t.Errorf("took %s: the sleeping job was not killed", d)
	}
}

func TestRunKeep(t *testing.T) {
	opts := Options{Keep: true}
	res := run(t, opts, okCase("kept"))
	r := res[0]
	if !r.Passed || !r.Kept {
		t.Fatalf("%+v", r)
	}
	data, err := os.ReadFile(filepath.Join(filepath.FromSlash(r.Prefix), "out", "10", "data"))
	if err != nil || string(data) != "HELLO 10\n" {
		t.Errorf("kept output: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(r.Local, "db")); err != nil {
		t.Errorf("kept state database: %v", err)
	}
}

func TestRunParallelSandboxesAreSeparate(t *testing.T) {
	var cases []testcase.Case
	for _, n := range []string{"a", "b", "c", "d"} {
		cases = append(cases, okCase(n))
	}
	cases[2].Outputs[0].Files["10/data"] = "x\n" // one fails; the others do not see its files
	res := run(t, Options{Parallel: 4}, cases...)
	for i, r := range res {
		if r.Passed != (i != 2) {
			t.Errorf("%s: passed=%v %q", r.Name, r.Passed, r.Failures)
		}
	}
}

// A case's name is only its own: cases named like the directories of
// the run's layout (fs, the run's file system; db, jobs, workflows,
// work, a case's own) run apart, in sequence and in parallel.
func TestCaseNamesLikeTheLayout(t *testing.T) {
	names := []string{"fs", "db", "jobs", "workflows", "work", "tmp"}
	for _, parallel := range []int{1, len(names)} {
		var cases []testcase.Case
		for _, n := range names {
			cases = append(cases, okCase(n))
		}
		res := run(t, Options{Parallel: parallel}, cases...)
		for _, r := range res {
			if !r.Passed {
				t.Errorf("parallel %d: case %s failed: %q", parallel, r.Name, r.Failures)
			}
		}
	}
}

func TestCheckBeforeAnythingRuns(t *testing.T) {
	oz := fixture.Hourly("oz")
	oz.ExternalService = fixture.Oozie(map[string]string{"oozie.wf.application.path": "/app/wf.xml", "oozie.libpath": "s3a://bucket/lib"})
	p := fixture.Project("p", oz)
	c := okCase("c")
	c.Workflows = []string{"oz"}
	_, err := Run(context.Background(), Options{Project: p, TempDir: t.TempDir()}, []testcase.Case{c})
	if !errors.Is(err, ErrSetup) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{
		`case c: workflow oz: property oozie.libpath: "s3a://bucket/lib": a s3a: URI cannot be put under the test's prefix`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	p.Workflows[0].ExternalService.Properties["oozie.libpath"] = "/lib"
	_, err = Run(context.Background(), Options{Project: p, TempDir: t.TempDir()}, []testcase.Case{c})
	if err == nil || !strings.Contains(err.Error(), `case c: workflow oz runs on oozie, which this run does not have: give the case a stand-in (services: "oz": celos.#Command & {...}) or run against an installation (--target)`) {
		t.Errorf("oozie without oozie: %v", err)
	}
	zero := okCase("zero")
	zero.End = zero.Start
	_, err = Run(context.Background(), Options{Project: copyProject(), TempDir: t.TempDir()}, []testcase.Case{zero})
	if err == nil || !strings.Contains(err.Error(), "a range of 0 covers no time") {
		t.Errorf("range of 0: %v", err)
	}
	// A range of more slots than a case may cover (a caller that did not
	// go through schema's checks) is refused before anything runs, not
	// stepped slot by slot for hours.
	long := okCase("long")
	long.End = long.Start.Add(time.Duration(testcase.MaxCaseSlots+1) * time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = Run(ctx, Options{Project: copyProject(), TempDir: t.TempDir()}, []testcase.Case{long})
	if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "case long: workflow") || !strings.Contains(err.Error(), "at most 10000") {
		t.Errorf("a range of %d hourly slots: %v, want a setup error", testcase.MaxCaseSlots+1, err)
	}
}

// TestTwoRunsAtOnceNeverShareASandbox starts two runs of the same case at
// the same time in the same temporary directory: both pass, in prefixes
// of their own, and both clean up.
func TestTwoRunsAtOnceNeverShareASandbox(t *testing.T) {
	tmp := t.TempDir()
	results := make(chan Result, 2)
	for i := 0; i < 2; i++ {
		go func() {
			res, err := Run(context.Background(), Options{Project: copyProject(), TempDir: tmp}, []testcase.Case{okCase("same")})
			if err != nil {
				t.Error(err)
				results <- Result{}
				return
			}
			results <- res[0]
		}()
	}
	a, b := <-results, <-results
	if !a.Passed || !b.Passed {
		t.Fatalf("failures: %q, %q", a.Failures, b.Failures)
	}
	if a.Prefix == b.Prefix || a.Local == b.Local {
		t.Errorf("the runs shared a sandbox: %s %s", a.Prefix, a.Local)
	}
	assertEmpty(t, tmp, false)
}

// TestRunHostileFixture: a FIFO (never opened: no hang), a symbolic link
// out of the project or to a directory in a fixture fail the case with
// what it is, and the sandbox is cleaned up; a link to a file inside the
// project is followed, as deploy follows it in hdfs/.
func TestRunHostileFixture(t *testing.T) {
	for name, tc := range map[string]struct {
		mk   func(dir, p string) error
		want string
	}{
		"fifo":         {func(_, p string) error { return syscall.Mkfifo(p, 0o644) }, "data is neither a regular file nor a directory"},
		"link out":     {func(_, p string) error { return os.Symlink("/etc/passwd", p) }, "data is a symbolic link that leaves the project directory"},
		"link to dir":  {func(dir, p string) error { return os.Symlink(dir, p) }, "data: a symbolic link to something other than a regular file"},
		"link to file": {func(dir, p string) error { return os.Symlink(filepath.Join(dir, "real"), p) }, ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "real"), []byte("hello 10\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			fx := filepath.Join(dir, "fx")
			if err := os.MkdirAll(filepath.Join(fx, "10"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(fx, "10", "_READY"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.mk(dir, filepath.Join(fx, "10", "data")); err != nil {
				t.Fatal(err)
			}
			c := okCase("hostile")
			c.End = c.Start.Add(30 * time.Minute)
			c.Inputs = []testcase.Input{{Path: "/in", Fixture: fx}}
			c.Outputs[0].Files = map[string]string{"10/data": "HELLO 10\n"}
			res := run(t, Options{Dir: dir}, c)
			if tc.want == "" {
				if !res[0].Passed {
					t.Errorf("failures: %q", res[0].Failures)
				}
				return
			}
			if res[0].Passed || len(res[0].Failures) != 1 || !strings.Contains(res[0].Failures[0], "write inputs[0] to /in: ") ||
				!strings.Contains(res[0].Failures[0], tc.want) {
				t.Errorf("failures: %q, want %q", res[0].Failures, tc.want)
			}
		})
	}
}

// TestRunRelativePathsStayInTheSandbox: a workflow written with relative
// paths (relative to the server's working directory, as the demo's) runs
// with them relative to the sandbox: its trigger waits for the input
// under the prefix, its command runs in the prefix, and nothing is written
// to the directory celos test runs in.
func TestRunRelativePathsStayInTheSandbox(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	w := fixture.Hourly("rel")
	w.Trigger = workflow.Trigger{Type: workflow.TriggerHDFSCheck, FS: "file:///", Path: "in/${hour}/_READY"}
	w.ExternalService = fixture.Command("sh", "-c", "mkdir -p out/${hour} && cp in/${hour}/data out/${hour}/data")
	c := okCase("relative")
	c.Outputs[0].Files = map[string]string{"10/data": "hello 10\n", "11/data": "hello 11\n", "12/data": "hello 12\n"}
	res := run(t, Options{Project: fixture.Project("p", w)}, c)
	if !res[0].Passed {
		t.Fatalf("failures: %q", res[0].Failures)
	}
	if left, _ := os.ReadDir(cwd); len(left) > 0 {
		t.Errorf("written to the working directory: %s", left[0].Name())
	}
}

// TestRunReportsTheEnginesErrors: a slot that waits because its trigger
// cannot be answered says why in the failure report.
func TestRunReportsTheEnginesErrors(t *testing.T) {
	c := okCase("trigger-error")
	c.End = c.Start.Add(30 * time.Minute)
	c.Outputs[0].Files = map[string]string{"10/data": "HELLO 10\n"}
	res := run(t, Options{Env: Env{Triggers: downFS{}}}, c)
	got := strings.Join(res[0].Failures, "\n")
	if !strings.Contains(got, "copy@2026-01-01T10:00:00.000Z WAITING (trigger: ") || !strings.Contains(got, "the name node is down") {
		t.Errorf("failures do not say why the slot waits:\n%s", got)
	}
}

// downFS answers every existence check with an error.
type downFS struct{}

func (downFS) Exists(context.Context, string, string) (bool, error) {
	return false, errors.New("the name node is down")
}
