package cmd

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/url"
	"os"
	osuser "os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/sandbox"
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

func init() { register(newTestCmd) }

type testFlags struct {
	run, junit, hdfs, hdfsPrefix, hdfsRoot string
	target, defaults, pools                string
	verbose, keep                          bool
	parallel                               int
	ssh                                    sshFlags // --target over SFTP
}

func newTestCmd() *cobra.Command {
	var f testFlags
	c := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Run the project's test cases, each in a sandbox of its own",
		Long: `test runs the test cases of the project in DIR (default: the current
directory; its tests: field, see docs/testing-workflows.md), in parallel,
each in a sandbox of its own: a private scheduler with a temporary state
database, every HDFS path of the workflows put under the case's prefix,
the project's hdfs/ directory and the case's inputs written there. Time
is stepped from the case's sampleTimeStart to its sampleTimeEnd, jumping
to the next slot time when nothing is READY or RUNNING, then the outputs
are compared with what is expected, and the sandbox is removed (also on
Ctrl-C; --keep leaves it for a post-mortem; the sandboxes of runs killed
with kill -9 are removed by the next run). Processes the commands leave
running (a background child, a daemon) are killed when the run ends.

By default the sandbox is on the local disk and slots run on the command
service (an Oozie workflow needs a stand-in in the case's services).
--hdfs URI puts prefixes, inputs and outputs on that HDFS (with --defaults
FILE naming an Oozie for Oozie workflows); --target URL runs against an
installation: the HDFS of its Hadoop configuration and the Oozie of its
defaults directory's defaults.json, as Celos CI did. On HDFS the run's
sandboxes go under /user/USER/.celos-test/PROJECT (--hdfs-prefix). The
target is checked before any case runs: it must name its file system
(fs.defaultFS, or CELOS_DEFAULT_HDFS in defaults.json; file:/// for an
installation on the local disk), that HDFS must answer, and so must the
Oozie of its defaults.json if a workflow runs on it.

A target read over SFTP is read as deploy reads it: host keys verified
against known_hosts (--known-hosts, $CELOS_KNOWN_HOSTS, else
~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts), keys from ssh-agent,
then --identity / $CELOS_SSH_IDENTITY; $CELOS_CI_USERNAME replaces the
user of its sftp: URLs.

Output is like go test's: a "--- FAIL: NAME (time)" block with the
differences for each failed case (-v: every case, with its slot
transitions), then "ok" or "FAIL". --junit FILE writes a JUnit XML report
for Jenkins or GitHub Actions.

Exit status: 0 every case passed, 1 a case failed or the project or its
tests are invalid, 2 usage error.`,
		Example: `  celos test                       # every case, on the local disk
  celos test -v --run 'hourly.*'   # some cases, with their slot transitions
  celos test --junit report.xml    # for CI
  celos test --hdfs hdfs://namenode:8020
  celos test --target sftp://celos.example.com/etc/celos/staging.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return runTest(c, args, &f) },
	}
	fs := c.Flags()
	fs.StringVar(&f.run, "run", "", "run only the cases whose names match this regular expression")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print every case, with its slot transitions")
	fs.StringVar(&f.junit, "junit", "", "write a JUnit XML report to FILE")
	fs.StringVar(&f.pools, "pools", "", "the installation's pools file: its limits hold in the sandbox (default: the pools the workflows name are unlimited)")
	fs.BoolVar(&f.keep, "keep", false, "leave each case's sandbox (prefix, state database, jobs) in place and print where")
	fs.IntVar(&f.parallel, "parallel", 0, "cases run at once (default: four per CPU)")
	fs.StringVar(&f.hdfs, "hdfs", "", "run on this HDFS (hdfs://host:port) instead of the local disk")
	fs.StringVar(&f.hdfsPrefix, "hdfs-prefix", "", "with --hdfs or --target: the directory the run's sandboxes go under (default /user/USER/.celos-test/PROJECT)")
	fs.StringVar(&f.hdfsRoot, "hdfs-root", "", "where hdfs/ goes under each prefix, as for deploy (default: the target's hdfs.root, else "+sandbox.DefaultHDFSRoot+")")
	fs.StringVar(&f.target, "target", "", "run against the installation of this target file (file: or sftp: URL): its HDFS, and the Oozie of its defaults directory")
	fs.StringVar(&f.defaults, "defaults", "", "with --hdfs: a celos defaults file (CELOS_DEFAULT_OOZIE and its properties) for Oozie workflows")
	f.ssh.register(fs)
	return c
}

func runTest(c *cobra.Command, args []string, f *testFlags) error {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	var re *regexp.Regexp
	if f.run != "" {
		var err error
		if re, err = regexp.Compile(f.run); err != nil {
			return usageError("--run %q: %v", f.run, err)
		}
	}
	if f.parallel < 0 {
		return usageError("--parallel %d: must be at least 1", f.parallel)
	}
	if f.hdfsRoot != "" {
		if err := targets.ValidateHDFSRoot(f.hdfsRoot); err != nil {
			return usageError("--hdfs-root: %v", err)
		}
	}
	if err := f.check(); err != nil {
		return err
	}
	stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
	restore := tuneGC()
	p, suite, diags, err := schema.CompileWithTests(dir)
	restore()
	printDiagnostics(stderr, diags)
	if err != nil {
		return silentExit(ExitFailure)
	}
	cases := sandbox.Select(suite.Cases, re)
	switch {
	case len(suite.Cases) == 0:
		fmt.Fprintf(stdout, "ok  \t%s\t[no test cases: add some under tests:, see docs/testing-workflows.md]\n", p.Project)
		return nil
	case len(cases) == 0:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("no test case matches --run %q (the project has %s)", f.run, caseNames(suite.Cases))}
	}
	ctx, stop := signalContext()
	defer stop()
	env, closeEnv, err := f.env(ctx, stderr, p)
	if err != nil {
		return err
	}
	defer closeEnv()
	// Each case's jobs are tied to this process: what they start is
	// killed when the case ends or this process dies, however it detached
	// (command.Options.Tied). Processes of a job whose supervisor was
	// itself killed become this process's children, killed when the run
	// ends (sandbox.Options.Orphans).
	if err := sandbox.AdoptOrphans(); err != nil {
		fmt.Fprintf(stderr, "celos test: %v (processes the commands leave running may outlive it)\n", err)
	}
	started := time.Now()
	abs, _ := filepath.Abs(dir)
	results, err := sandbox.Run(ctx, sandbox.Options{
		Project: p, Dir: abs, HDFSDir: filepath.Join(abs, "hdfs"), HDFSRoot: f.hdfsRoot,
		Env: env, Parallel: f.parallel, Keep: f.keep, PoolsFile: f.pools,
		Orphans: func(n int, err error) { reportOrphans(stderr, n, err) },
		Stale:   func(removed []sandbox.Stale, err error) { reportStale(stderr, removed, err) },
	}, cases)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	elapsed := time.Since(started)
	failed := printResults(stdout, p.Project, results, f.verbose, elapsed)
	if f.junit != "" {
		if err := writeJUnit(f.junit, p.Project, results, elapsed); err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("write the JUnit report: %w", err)}
		}
	}
	if failed > 0 || ctx.Err() != nil {
		return silentExit(ExitFailure)
	}
	return nil
}

// reportOrphans says how many processes the cases' commands left running
// were killed at the end of the run.
func reportOrphans(stderr io.Writer, n int, err error) {
	if n > 0 {
		fmt.Fprintf(stderr, "celos test: killed %d processes the test cases' commands left running\n", n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "celos test: %v\n", err)
	}
}

// reportStale names the sandboxes of killed runs removed before the run,
// and those that could not be.
func reportStale(stderr io.Writer, removed []sandbox.Stale, err error) {
	for _, st := range removed {
		also := ""
		if st.Remote != "" {
			also = " and " + st.Remote
		}
		fmt.Fprintf(stderr, "celos test: removed the sandbox of a run that was killed: %s%s\n", st.Local, also)
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "celos test: %s\n", line)
		}
	}
}

// check checks the flags that say where the sandboxes live.
func (f *testFlags) check() error {
	switch {
	case f.hdfs != "" && f.target != "":
		return usageError("--hdfs and --target exclude each other (a target names its HDFS)")
	case f.hdfs == "" && f.target == "" && f.hdfsPrefix != "":
		return usageError("--hdfs-prefix needs --hdfs or --target")
	case f.defaults != "" && f.hdfs == "":
		return usageError("--defaults needs --hdfs (a target names its defaults)")
	case f.target == "" && (len(f.ssh.knownHosts) > 0 || len(f.ssh.identities) > 0 || f.ssh.insecure):
		return usageError("--known-hosts, --identity and --insecure-ignore-host-key need --target (they are for reading it over SFTP)")
	}
	if f.hdfs != "" {
		u, err := url.Parse(f.hdfs)
		if err != nil || u.Scheme != "hdfs" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return usageError("--hdfs %q: want hdfs://host:port", f.hdfs)
		}
	}
	if f.hdfsPrefix != "" {
		if err := testcase.CheckPath(f.hdfsPrefix); err != nil {
			return usageError("--hdfs-prefix: %v", err)
		}
	}
	return nil
}

// env is where the sandboxes live: the local disk, --hdfs or --target. It
// may set f.hdfsRoot from the target. Everything wrong with the place (a
// target that cannot be read, an HDFS that does not answer) is reported
// here, before any case runs.
func (f *testFlags) env(ctx context.Context, stderr io.Writer, p *workflow.Project) (sandbox.Env, func(), error) {
	if f.hdfs == "" && f.target == "" {
		return sandbox.Env{}, func() {}, nil
	}
	user := os.Getenv("HADOOP_USER_NAME")
	if user == "" {
		if cu, err := osuser.Current(); err == nil {
			user = cu.Username
		}
	}
	base := f.hdfsPrefix
	if base == "" {
		base = sandbox.SandboxBase(user, p.Project)
	}
	if f.hdfs != "" {
		var d *defaults.Defaults
		if f.defaults != "" {
			var err error
			if d, err = defaults.Load(f.defaults); err != nil {
				return sandbox.Env{}, nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("--defaults: %w", err)}
			}
		}
		if err := sandbox.CheckOozie(ctx, d, p); err != nil {
			return sandbox.Env{}, nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("--defaults %s: %w", f.defaults, err)}
		}
		env, closeEnv, err := sandbox.HDFSEnv(ctx, f.hdfs, "", base, d)
		if err != nil {
			return sandbox.Env{}, nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("--hdfs: %w", err)}
		}
		return env, closeEnv, nil
	}
	sshOpts := f.ssh.options(stderr, "choose the HDFS and the Oozie your test cases run on")
	conn := targets.NewConnector(sshOpts, hadoopconf.Options{})
	defer conn.Close()
	in, err := sandbox.LoadInstallation(ctx, conn, f.target, os.Getenv("CELOS_CI_USERNAME"))
	if err != nil {
		return sandbox.Env{}, nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("--target: %w", err)}
	}
	if f.hdfsRoot == "" {
		f.hdfsRoot = in.HDFSRoot
	}
	if err := sandbox.CheckOozie(ctx, in.Defaults, p, oozie.HadoopClientOptions(in.Conf, hadoopconf.Options{}, "")...); err != nil {
		return sandbox.Env{}, nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("--target: target file %s: %w", in.Source, err)}
	}
	env, closeEnv, err := sandbox.TargetEnv(ctx, in, "", base)
	if err != nil {
		return sandbox.Env{}, nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("--target: target file %s: %w", in.Source, err)}
	}
	return env, closeEnv, nil
}

func caseNames(cs []testcase.Case) string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if len(names) > 10 {
		names = append(names[:10], "…")
	}
	return strings.Join(names, ", ")
}

// printResults prints the results as go test does and returns how many
// cases failed.
func printResults(w io.Writer, project string, results []sandbox.Result, verbose bool, elapsed time.Duration) int {
	failed, interrupted := 0, false
	for _, r := range results {
		interrupted = interrupted || r.Interrupted
		if r.Passed && !verbose && !r.Kept {
			continue
		}
		verdict := "PASS"
		if !r.Passed {
			verdict = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "--- %s: %s (%.2fs)\n", verdict, r.Name, r.Elapsed.Seconds())
		for _, msg := range r.Failures {
			fmt.Fprintln(w, indent(msg))
		}
		if verbose {
			for _, l := range r.Log {
				fmt.Fprintln(w, indent(l))
			}
		}
		if r.Kept {
			fmt.Fprintln(w, indent("sandbox kept: prefix "+r.Prefix+", state database and jobs "+r.Local))
		}
	}
	switch {
	case interrupted:
		fmt.Fprintf(w, "FAIL\n%s\t%s\t%.3fs\t(interrupted; the sandboxes were cleaned up)\n", "FAIL", project, elapsed.Seconds())
	case failed > 0:
		fmt.Fprintf(w, "FAIL\n%s\t%s\t%.3fs\t(%d of %s failed)\n", "FAIL", project, elapsed.Seconds(), failed, plural(len(results), "case"))
	default:
		if verbose {
			fmt.Fprintln(w, "PASS")
		}
		fmt.Fprintf(w, "ok  \t%s\t%.3fs\t(%s)\n", project, elapsed.Seconds(), plural(len(results), "case"))
	}
	return failed
}

// plural is "1 case", "2 cases".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// indent indents every line of s by four spaces.
func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// JUnit XML, as Jenkins's junit step and the GitHub Actions test
// reporters read it.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitText struct {
	Text string `xml:",cdata"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// writeJUnit writes the results as a JUnit XML report to name.
func writeJUnit(name, project string, results []sandbox.Result, elapsed time.Duration) error {
	s := junitSuite{Name: project, Tests: len(results), Time: fmt.Sprintf("%.3f", elapsed.Seconds()),
		Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05")}
	for _, r := range results {
		jc := junitCase{Name: r.Name, ClassName: project, Time: fmt.Sprintf("%.3f", r.Elapsed.Seconds())}
		if len(r.Log) > 0 {
			jc.SystemOut = &junitText{strings.Join(r.Log, "\n")}
		}
		if !r.Passed {
			s.Failures++
			msg := "failed"
			if len(r.Failures) > 0 {
				msg, _, _ = strings.Cut(r.Failures[0], "\n")
			}
			jc.Failure = &junitFailure{Message: msg, Type: "celos.test", Text: strings.Join(r.Failures, "\n\n")}
		}
		s.Cases = append(s.Cases, jc)
	}
	data, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{s}}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(name, append([]byte(xml.Header), append(data, '\n')...), 0o644)
}
