// Package deploy deploys, undeploys and plans (dry-runs) a celos project
// to a target: the Oozie directory hdfs/ goes to $HDFS_ROOT/NAME, then the
// compiled workflows to $WORKFLOWS_DIR/NAME.json, each side atomically
// (written under a temporary name, then renamed into place), under a
// per-project lock, recording what was written in a manifest that
// undeploy and plan read. Before touching anything it refuses what could
// destroy another project or installation (safety.go): missing target
// directories, an Oozie directory overlapping the workflows directory or
// deployed through another one, clashing workflow ids, foreign Oozie
// application paths, and files of hdfs/ outside the project.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path"
	"strings"
	"time"

	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// DefaultHDFSRoot is where Oozie directories go when neither --hdfs-root
// nor the target's hdfs.root says otherwise (as Celos).
const DefaultHDFSRoot = "/user/celos/app"

// StateDir is the directory, inside the workflows directory, that holds
// each project's lock and manifest. The server loads only *.json files of
// the workflows directory itself, so it never reads these.
const StateDir = ".celos-deploy"

// CompileFunc compiles the CUE project in dir, as `celos vet` checks it.
// warnings are shown but do not stop a deploy; an error does.
type CompileFunc func(dir string) (p *workflow.Project, warnings []string, err error)

// Options are shared by Deploy, Undeploy and Plan.
type Options struct {
	// Target is the target file's URL (--target).
	Target string
	// Project is the project name (--project): the workflows file is
	// NAME.json and the Oozie directory $HDFS_ROOT/NAME. For Deploy and
	// Plan it defaults to the compiled project's name and must equal it.
	Project string
	// DeployDir is the project directory: the CUE package and hdfs/
	// (--deploy-dir, default ".").
	DeployDir string
	// HDFSRoot overrides the target's hdfs.root and DefaultHDFSRoot.
	HDFSRoot string
	// User replaces the user of sftp URLs (CELOS_CI_USERNAME) and is
	// recorded as the deployer; "" means the OS user.
	User string
	// Connector opens file systems; the caller closes it.
	Connector *targets.Connector
	// Compile compiles the project (Deploy and Plan).
	Compile CompileFunc
	// BreakLock removes another deploy's lock first (--break-lock).
	BreakLock bool
	// Parallel is the number of files uploaded at once (default
	// DefaultParallel).
	Parallel int
	// Version is celos's version, recorded in the manifest.
	Version string
	// CacheDir, if set, is celos's cache directory (internal/cache):
	// the SHA-256 of the local files is kept there by their identity,
	// so an unchanged project is compared without reading its files.
	CacheDir string
	// Step, if set, is told when each step begins.
	Step func(name string)
	// Progress, if set, is told of upload progress a few times a second
	// and once at the end.
	Progress            func(Progress)
	CreateDirs          bool
	AllowForeignAppPath bool
	// Warn, if set, receives warnings (compile warnings, clean-up that
	// failed after a successful deploy).
	Warn func(string)
	// NameSource, if set, says where the name of the project in dir comes
	// from (its project: field, or its package name), for the message
	// when --project does not match it.
	NameSource func(dir string) string
}

// Progress counts an upload.
type Progress struct {
	Files, TotalFiles int
	Bytes, TotalBytes int64
}

// ValidateProjectName refuses names that are not a single safe path
// element: the name becomes a file name and an HDFS directory name
// (workflow.ValidateProjectName, which celos init checks too).
func ValidateProjectName(name string) error { return workflow.ValidateProjectName(name) }

// StepError is a failed step of a deploy or undeploy.
type StepError struct {
	Step string
	Err  error
	// Intact is true when the previous deployment (if any) is still in
	// place, unchanged.
	Intact bool
	// AtRisk is true when a deployment existed and the command had begun
	// to change the target: only then does the message reassure that the
	// previous deployment is intact.
	AtRisk bool
	// Note says what state the target is in when it is not intact.
	Note string
}

func (e *StepError) Error() string {
	msg := e.Short()
	if e.Intact && e.AtRisk {
		return msg + "\nThe previous deployment is intact; rerun the command once the cause is fixed."
	}
	if e.Note != "" {
		return msg + "\n" + e.Note
	}
	return msg
}

// Short is the message without the sentence about the target's state
// (Intact and Note say that), for the --json summary.
func (e *StepError) Short() string { return fmt.Sprintf("step %q failed: %v", e.Step, e.Err) }

func (e *StepError) Unwrap() error { return e.Err }

// session is what every command needs: the target and its workflows side.
type session struct {
	o        Options
	target   *targets.Target
	wf       targets.FS // file system of the workflows directory
	wfDir    string
	wfFile   string // $WORKFLOWS_DIR/NAME.json
	stateDir string
	hdfsRoot string
	conf     hadoopconf.Conf
	hdfs     targets.FS
	hdfsName string
	step     string

	wfKeyCache string // see wfKey
	undeploy   bool
	// manifestDirDropped: the manifest named an Oozie directory other
	// than HDFS_ROOT/NAME, which readManifest dropped.
	manifestDirDropped bool
	// manifestUnreadable: the project has a manifest that could not be
	// read (truncated, not a manifest, too large).
	manifestUnreadable bool
	// atRisk: a deployment exists and the command holds the lock to
	// change it (see StepError.AtRisk).
	atRisk bool
	// realPaths caches serverRealPaths (server key and path).
	realPaths map[string]string
	// warned are the warnings given, each given once though a check
	// that warns may run more than once (checkOwner).
	warned map[string]bool
}

func (s *session) begin(step string) {
	s.step = step
	if s.o.Step != nil {
		s.o.Step(step)
	}
}

func (s *session) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if s.o.Warn == nil || s.warned[msg] {
		return
	}
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[msg] = true
	s.o.Warn(msg)
}

func (s *session) fail(err error, intact bool) error {
	return &StepError{Step: s.step, Err: err, Intact: intact, AtRisk: s.atRisk}
}

// deployed reports whether the project is deployed: a manifest or its
// workflows file.
func (s *session) deployed(m *Manifest) bool {
	if m != nil {
		return true
	}
	ok, err := targets.Exists(s.wf, s.wfFile)
	return ok || err != nil // unknown counts as deployed: say it is intact
}

// openSession reads the target file and opens its workflows directory.
func openSession(ctx context.Context, o Options) (*session, error) {
	if err := ValidateProjectName(o.Project); err != nil {
		return nil, err
	}
	return openTarget(ctx, o)
}

// openTarget is openSession for any project or none (Deployments).
func openTarget(ctx context.Context, o Options) (*session, error) {
	if o.Connector == nil {
		return nil, errors.New("deploy: no Connector")
	}
	s := &session{o: o}
	s.begin("read target")
	t, err := targets.Load(ctx, o.Connector, o.Target, targets.ParseOptions{User: o.User})
	if err != nil {
		return nil, s.fail(err, true)
	}
	s.target = t
	s.hdfsRoot = o.HDFSRoot
	if s.hdfsRoot == "" {
		s.hdfsRoot = t.HDFSRoot
	}
	if s.hdfsRoot == "" {
		s.hdfsRoot = DefaultHDFSRoot
	}
	if err := targets.ValidateHDFSRoot(s.hdfsRoot); err != nil {
		return nil, fmt.Errorf("--hdfs-root: %w", err)
	}
	s.begin("connect")
	if s.wf, err = o.Connector.Open(ctx, t.WorkflowsDir); err != nil {
		return nil, s.fail(fmt.Errorf("workflows directory %s: %w", t.WorkflowsDir, err), true)
	}
	s.wfDir = t.WorkflowsDir.Path
	s.wfFile = path.Join(s.wfDir, o.Project+".json")
	s.stateDir = path.Join(s.wfDir, StateDir)
	return s, nil
}

// openHDFS connects to the HDFS side (once): the cluster the target's
// Hadoop configuration names, or the installation's own disk when
// fs.defaultFS is file:///. It refuses an Oozie directory that overlaps
// the workflows or defaults directory (checkOverlap).
func (s *session) openHDFS(ctx context.Context) (targets.FS, error) {
	if s.hdfs != nil {
		return s.hdfs, nil
	}
	// Before anything on the HDFS side is read or written.
	if err := s.checkOverlap(ctx, s.hdfsDir()); err != nil {
		return nil, err
	}
	fsys, name, err := s.o.Connector.OpenHDFS(ctx, s.conf, s.target.WorkflowsDir)
	if err != nil {
		return nil, err
	}
	s.hdfs, s.hdfsName = fsys, name
	return fsys, nil
}

func (s *session) hdfsDir() string { return path.Join(s.hdfsRoot, s.o.Project) }

func (s *session) wfURL() string { return s.target.WorkflowsDir.Join(s.o.Project + ".json").String() }

func (s *session) hdfsURL(dir string) string {
	if s.hdfsName == "" {
		return dir
	}
	return s.hdfsName + dir
}

// who is the deploying user and machine.
func who(o Options) (userName, host string) {
	userName = o.User
	if userName == "" {
		if u, err := user.Current(); err == nil {
			userName = u.Username
		}
	}
	host, _ = os.Hostname()
	return userName, host
}

// gitCommit returns the commit checked out in dir and whether the work
// tree has changes, from git, else from CI variables.
func gitCommit(dir string) (commit string, dirty bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			dirty = len(strings.TrimSpace(string(st))) > 0
		}
		return commit, dirty
	}
	for _, v := range []string{"GITHUB_SHA", "GIT_COMMIT", "CI_COMMIT_SHA"} {
		if c := os.Getenv(v); c != "" {
			return c, false
		}
	}
	return "", false
}
