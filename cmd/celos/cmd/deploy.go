package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/celos-go/celos/deploy"
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

func init() { register(newDeployCmd) }

// deployFlags are the flags deploy, undeploy and plan share.
type deployFlags struct {
	target, project, deployDir, hdfsRoot string
	sshFlags
	quiet, asJSON, breakLock            bool
	dryRun, createDirs, allowForeignApp bool
	diffAll                             bool // plan: every line of each file's diff
	parallel                            int
	line                                *progressLine // on a terminal
}

func (f *deployFlags) register(fs *pflag.FlagSet, withDeployDir, withLock bool) {
	fs.StringVar(&f.target, "target", "", "the target file: a file: or sftp: URL (or a local path)")
	fs.StringVar(&f.project, "project", "", "the project name: the workflows file is NAME.json, the Oozie directory HDFS_ROOT/NAME")
	fs.StringVar(&f.hdfsRoot, "hdfs-root", "", "HDFS root of Oozie directories (default: the target's hdfs.root, else "+deploy.DefaultHDFSRoot+")")
	f.sshFlags.register(fs)
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print nothing but errors")
	fs.BoolVar(&f.asJSON, "json", false, "print a JSON summary on stdout")
	if withDeployDir {
		fs.StringVar(&f.deployDir, "deploy-dir", ".", "the project directory: the CUE package and its hdfs/ directory")
		fs.BoolVar(&f.createDirs, "create-dirs", false, "create the target's workflows and defaults directories if missing (a first install; without it a missing one is refused, as a typo)")
		fs.BoolVar(&f.allowForeignApp, "allow-foreign-app-path", false, "deploy even when a workflow's oozie.wf.application.path is not under HDFS_ROOT/NAME")
	}
	if withLock {
		fs.BoolVar(&f.breakLock, "break-lock", false, "remove another deploy's lock of this project first (when that deploy is known to be dead)")
	}
}

// options builds the deploy options and the connector (closed by the caller).
func (f *deployFlags) options(c *cobra.Command) (deploy.Options, *targets.Connector, error) {
	if f.target == "" {
		return deploy.Options{}, nil, usageError("--target is required (a file: or sftp: URL of a target file, e.g. --target $PRODUCTION_TARGET)")
	}
	sshOpts := f.sshFlags.options(c.ErrOrStderr(), "receive your workflows")
	conn := targets.NewConnector(sshOpts, hadoopconf.Options{})
	o := deploy.Options{
		Target:     f.target,
		Project:    f.project,
		DeployDir:  f.deployDir,
		HDFSRoot:   f.hdfsRoot,
		User:       os.Getenv("CELOS_CI_USERNAME"),
		Connector:  conn,
		Compile:    compileProject,
		NameSource: schema.NameSource,
		BreakLock:  f.breakLock,
		Parallel:   f.parallel,
		Version:    version(),
		CacheDir:   cacheDir(),

		CreateDirs:          f.createDirs,
		AllowForeignAppPath: f.allowForeignApp,
	}
	stderr := c.ErrOrStderr()
	o.Warn = func(msg string) { fmt.Fprintf(stderr, "celos: warning: %s\n", msg) }
	if !f.quiet && !f.asJSON && isTerminal(stderr) {
		p := &progressLine{w: stderr}
		f.line = p
		o.Step = p.step
		o.Progress = p.progress
		o.Warn = func(msg string) { p.clear(); fmt.Fprintf(stderr, "celos: warning: %s\n", msg) }
	}
	return o, conn, nil
}

// compileProject is the compile step: the same checks as `celos vet`.
// An unchanged project is answered from the compile cache, as celos vet.
func compileProject(dir string) (*workflow.Project, []string, error) {
	r := schema.CompileCached(dir, compileCache(false))
	p, err := r.Load()
	diags := r.Diags
	var warnings []string
	for _, d := range diags {
		if d.Warning {
			d.Warning = false // printed as "celos: warning: pos: msg"
			warnings = append(warnings, d.String())
		}
	}
	return p, warnings, err
}

// signalContext is cancelled by SIGINT or SIGTERM, so that an interrupted
// deploy still removes its temporary files and its lock.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func newDeployCmd() *cobra.Command {
	var f deployFlags
	c := &cobra.Command{
		Use:   "deploy --target URL [--project NAME] [--deploy-dir DIR] [--hdfs-root PATH]",
		Short: "Deploy a project's workflows and Oozie directory to a target",
		Long: `deploy compiles the project in --deploy-dir (refusing an invalid one, with
the same checks as celos vet) and deploys it to the installation the target
file describes (a Celos target file, fetched from a file: or sftp: URL):

  hdfs/            -> HDFS_ROOT/NAME             (the Oozie directory)
  compiled JSON    -> WORKFLOWS_DIR/NAME.json    (what the server schedules)

The Oozie directory goes first and the workflows file last, so the server
never sees a workflow whose directory is missing. Each side is atomic: the
new version is written under a temporary name and renamed into place, and
the previous one is removed only after the new one is in place. A failure
at any step leaves the previous deployment intact and says which step
failed. A per-project lock stops two deploys from interleaving; a manifest
of what was written (with the git commit and user) is kept for undeploy
and plan.

When the target's core-site.xml sets fs.defaultFS to file:/// the "HDFS"
side is a directory on the installation's own disk (over SFTP for an sftp:
workflows directory), so a deploy works without a cluster.

Before anything is touched, deploy refuses (exit 1, naming what and why):
  - a workflows or defaults directory that does not exist (a typo in the
    target file?); --create-dirs creates them for a first install;
  - an HDFS_ROOT/NAME that is, contains or is inside the workflows or
    defaults directory;
  - an HDFS_ROOT/NAME deployed through another workflows directory (its
    owner record, HDFS_ROOT/NAME/.celos-deploy.json, says which);
  - a workflow id that another project in the workflows directory already
    deploys (or another project's workflows file it cannot read);
  - a workflow whose oozie.wf.application.path is not under HDFS_ROOT/NAME,
    unless --allow-foreign-app-path;
  - a symbolic link in hdfs/ that leaves the project, a FIFO or device.

SSH: host keys are verified against known_hosts (--known-hosts,
$CELOS_KNOWN_HOSTS, else ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts);
keys come from ssh-agent, then --identity / $CELOS_SSH_IDENTITY, else
~/.ssh/id_ed25519, id_ecdsa, id_rsa. $CELOS_CI_USERNAME replaces the user of every sftp: URL. HDFS acts
as $HADOOP_USER_NAME (else the OS user), or the Kerberos principal.

Output: progress on a terminal, one summary line otherwise, nothing with
--quiet, a JSON summary with --json.

Exit status: 0 deployed, 1 failed, 2 usage error. With --dry-run (see
celos plan): 0 no change, 2 changes, 1 error.`,
		Example: `  celos deploy --target $PRODUCTION_TARGET
  celos deploy --target sftp://celos.example.com/etc/celos/target.json --project wordcount --deploy-dir ./wordcount
  celos deploy --target file:///etc/celos/target.json --dry-run`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				code := ExitUsage
				if f.dryRun {
					code = ExitFailure // 2 means "changes" for a dry run
				}
				return &ExitError{Code: code, Err: fmt.Errorf("deploy takes no arguments, got %q (the project directory is --deploy-dir DIR)\nRun '%s --help' for usage.", args, c.CommandPath())}
			}
			if f.parallel < 1 {
				code := ExitUsage
				if f.dryRun {
					code = ExitFailure
				}
				return &ExitError{Code: code, Err: fmt.Errorf("--parallel %d: want at least 1\nRun '%s --help' for usage.", f.parallel, c.CommandPath())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if f.dryRun {
				return runPlan(c, &f)
			}
			o, conn, err := f.options(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, stop := signalContext()
			defer stop()
			res, err := deploy.Deploy(ctx, o)
			return report(c, &f, "deployed", res, err)
		},
	}
	f.register(c.Flags(), true, true)
	c.Flags().BoolVar(&f.dryRun, "dry-run", false, "show what would change and change nothing (as celos plan)")
	c.Flags().BoolVar(&f.diffAll, "diff", false, "with --dry-run: show all of each changed text file's diff (default: the first 40 lines)")
	c.Flags().IntVar(&f.parallel, "parallel", deploy.DefaultParallel, "files uploaded at once")
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		code := ExitUsage
		if f.dryRun {
			code = ExitFailure // 2 means "changes" for a dry run
		}
		return &ExitError{Code: code, Err: fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	return c
}

// report prints a deploy or undeploy outcome.
func report(c *cobra.Command, f *deployFlags, verb string, res *deploy.Result, err error) error {
	stdout := c.OutOrStdout()
	if f.line != nil {
		f.line.clear()
	}
	if err != nil {
		if f.asJSON {
			out := map[string]any{"ok": false, "error": err.Error()}
			var se *deploy.StepError
			if errors.As(err, &se) {
				// "intact" says what the text's last sentence says.
				out["error"], out["step"], out["intact"] = se.Short(), se.Step, se.Intact
				if se.Note != "" {
					out["note"] = se.Note
				}
			}
			writeJSON(stdout, out)
		}
		var ee *ExitError
		if errors.As(err, &ee) {
			return err
		}
		return &ExitError{Code: ExitFailure, Err: err}
	}
	switch {
	case f.asJSON:
		writeJSON(stdout, struct {
			OK bool `json:"ok"`
			*deploy.Result
		}{true, res})
	case f.quiet:
	default:
		fmt.Fprintln(stdout, summary(verb, res))
	}
	return nil
}

func summary(verb string, r *deploy.Result) string {
	var b strings.Builder
	if verb == "undeployed" {
		if len(r.Removed) == 0 {
			return fmt.Sprintf("nothing to undeploy: %s is not deployed on %s", r.Project, r.Target)
		}
		fmt.Fprintf(&b, "undeployed %s from %s: removed %s in %.1fs", r.Project, r.Target, strings.Join(r.Removed, ", "), r.Seconds)
		return b.String()
	}
	fmt.Fprintf(&b, "%s %s to %s: %d workflow(s)", verb, r.Project, r.Target, r.Workflows)
	if r.Files > 0 || r.HDFSDir != "" {
		fmt.Fprintf(&b, ", %d file(s), %s", r.Files, deploy.HumanBytes(r.Bytes))
	}
	fmt.Fprintf(&b, " in %.1fs", r.Seconds)
	switch {
	case r.GitCommit != "" && r.GitDirty:
		fmt.Fprintf(&b, " (commit %.12s + uncommitted changes: dirty)", r.GitCommit)
	case r.GitCommit != "":
		fmt.Fprintf(&b, " (commit %.12s)", r.GitCommit)
	}
	return b.String()
}

// writeJSON prints v indented, without encoding/json's HTML escaping (an
// error's <token> stays <token>, not \u003ctoken\u003e), and with DEL and
// the C1 controls escaped (escapeJSONControls): a deployment's fields are
// read from the installation.
func writeJSON(w io.Writer, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	w.Write(escapeJSONControls(b.Bytes()))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressLine shows the current step and upload progress on one
// terminal line.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	name  string
	dirty bool
	start time.Time
}

func (p *progressLine) step(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name, p.start = name, time.Now()
	p.draw(name + "...")
}

func (p *progressLine) progress(pr deploy.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rate := ""
	if s := time.Since(p.start).Seconds(); s > 0.5 {
		rate = fmt.Sprintf(", %s/s", deploy.HumanBytes(int64(float64(pr.Bytes)/s)))
	}
	p.draw(fmt.Sprintf("%s: %d/%d files, %s/%s%s", p.name, pr.Files, pr.TotalFiles, deploy.HumanBytes(pr.Bytes), deploy.HumanBytes(pr.TotalBytes), rate))
}

func (p *progressLine) draw(s string) {
	fmt.Fprintf(p.w, "\r\033[K%s", s)
	p.dirty = true
}

func (p *progressLine) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
		p.dirty = false
	}
}
