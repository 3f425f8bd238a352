package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/hdfscheck"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// SandboxBase is where a run's sandboxes go on HDFS by default, as in
// Celos CI (/user/<user>/.celos-ci/<workflow>): /user/<user>/.celos-test/<project>.
func SandboxBase(user, project string) string {
	return path.Join("/user", user, ".celos-test", project)
}

// PingTimeout bounds the check, before any case runs, that the HDFS of
// HDFSEnv and TargetEnv answers.
const PingTimeout = 30 * time.Second

// HDFSEnv is the Env of sandboxes on the HDFS at uri (hdfs://host:port,
// reached with an empty Hadoop configuration as user; "" means
// $HADOOP_USER_NAME, else the OS user) under base, with the Oozie of d if
// d names one (nil: none). It checks that the NameNode answers (within
// PingTimeout), so that an HDFS that is not there is reported before any
// case runs. Close releases its connections.
func HDFSEnv(ctx context.Context, uri, user, base string, d *defaults.Defaults) (Env, func(), error) {
	return hdfsEnv(ctx, nil, uri, user, base, d)
}

func hdfsEnv(ctx context.Context, conf hadoopconf.Conf, uri, user, base string, d *defaults.Defaults) (Env, func(), error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "hdfs" || u.Host == "" {
		return Env{}, nil, fmt.Errorf("%q is not an hdfs://host:port URI", uri)
	}
	uri = "hdfs://" + u.Host
	pool := targets.NewHDFSPool(conf, targets.HDFSOptions{Client: hadoopconf.Options{User: user}})
	fsys, err := pool.FS(uri)
	if err != nil {
		pool.Close()
		return Env{}, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	err = fsys.Ping(pctx)
	cancel()
	if err != nil {
		pool.Close()
		return Env{}, nil, fmt.Errorf("HDFS %s does not answer: %w", uri, err)
	}
	checks := hdfscheck.New(conf, hdfscheck.Options{User: user})
	def := uri
	if d != nil && d.HDFS != "" {
		def = d.HDFS
	}
	mux := trigger.NewMux(def)
	mux.Handle("hdfs", checks)
	env := Env{FS: fsys, FSURI: uri, Base: base, Triggers: mux}
	if d != nil && d.Oozie != "" {
		env.Services = map[string]external.Service{workflow.ServiceOozie: oozie.NewService(d, nil, oozie.HadoopAuth(conf, hadoopconf.Options{}, "")...)}
	}
	return env, func() {
		checks.Close()
		pool.Close()
	}, nil
}

// Installation is what a target file says about an installation, for
// TargetEnv.
type Installation struct {
	// Source is the target file's URL, for messages.
	Source string
	// Conf is its Hadoop configuration (core-site.xml, hdfs-site.xml).
	Conf hadoopconf.Conf
	// Defaults are its defaults (defaults.json of the target's defaults
	// directory), nil when it has none.
	Defaults *defaults.Defaults
	// HDFSRoot is the target's hdfs.root ("" when absent).
	HDFSRoot string
}

// LoadInstallation reads the target file at rawURL through conn (user,
// when set, replaces the user of its sftp: URLs): its Hadoop
// configuration and, where Celos CI copied the target's defaults
// directory, the defaults.json there (if any).
func LoadInstallation(ctx context.Context, conn *targets.Connector, rawURL, user string) (*Installation, error) {
	t, err := targets.Load(ctx, conn, rawURL, targets.ParseOptions{User: user})
	if err != nil {
		return nil, err
	}
	conf, err := t.HadoopConf(ctx, conn)
	if err != nil {
		return nil, err
	}
	in := &Installation{Source: t.Source, Conf: conf, HDFSRoot: t.HDFSRoot}
	if t.DefaultsDir == nil {
		return in, nil
	}
	loc := t.DefaultsDir.Join(defaults.FileName)
	fsys, err := conn.Open(ctx, loc)
	if err != nil {
		return nil, fmt.Errorf("target file %s: defaults directory: %w", t.Source, err)
	}
	data, err := targets.ReadFile(fsys, loc.Path, defaults.MaxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return in, nil
	}
	if err != nil {
		return nil, fmt.Errorf("target file %s: %w", t.Source, err)
	}
	if in.Defaults, err = defaults.Parse(loc.String(), data); err != nil {
		return nil, err
	}
	return in, nil
}

// ErrNoFileSystem is wrapped by TargetEnv's error for an installation
// that names no file system for the sandboxes.
var ErrNoFileSystem = errors.New("the target names no file system")

// TargetEnv is the Env of sandboxes on the installation's HDFS (its
// defaults' CELOS_DEFAULT_HDFS, else fs.defaultFS of its Hadoop
// configuration) under base, with its Oozie; an installation whose file
// system is file: (said so: Hadoop's default of file:/// does not count)
// gets sandboxes on the local disk. Everything it finds wrong (no file
// system, one of another kind, an HDFS that does not answer) is reported
// before any case runs.
func TargetEnv(ctx context.Context, in *Installation, user, base string) (Env, func(), error) {
	uri, from, err := in.fileSystem()
	if err != nil {
		return Env{}, nil, err
	}
	if strings.HasPrefix(uri, "file:") {
		// An installation on the local disk (the demo's): sandboxes there
		// too, with its Oozie if its defaults name one.
		env := Env{}
		if in.Defaults != nil && in.Defaults.Oozie != "" {
			env.Services = map[string]external.Service{workflow.ServiceOozie: oozie.NewService(in.Defaults, nil, oozie.HadoopAuth(in.Conf, hadoopconf.Options{}, "")...)}
		}
		return env, func() {}, nil
	}
	if !strings.HasPrefix(uri, "hdfs://") {
		return Env{}, nil, fmt.Errorf("the target's file system is %s (%s): celos test runs on hdfs:// and file: ones", uri, from)
	}
	env, closeEnv, err := hdfsEnv(ctx, in.Conf, uri, user, base, in.Defaults)
	if err != nil {
		return Env{}, nil, fmt.Errorf("the target's file system (%s): %w", from, err)
	}
	return env, closeEnv, nil
}

// fileSystem is the installation's file system and where it is named.
func (in *Installation) fileSystem() (uri, from string, err error) {
	if in.Defaults != nil && in.Defaults.HDFS != "" {
		return in.Defaults.HDFS, "CELOS_DEFAULT_HDFS of its defaults.json", nil
	}
	for _, k := range []string{"fs.defaultFS", "fs.default.name"} {
		v, err := in.Conf.Expand(k)
		if err != nil {
			return "", "", fmt.Errorf("the target's Hadoop configuration: %w", err)
		}
		if v != "" {
			return v, k + " of its Hadoop configuration", nil
		}
	}
	return "", "", fmt.Errorf("%w: its Hadoop configuration has no fs.defaultFS and its defaults.json no CELOS_DEFAULT_HDFS "+
		"(an installation on the local disk says fs.defaultFS file:/// in its core-site.xml)", ErrNoFileSystem)
}

// CheckOozie checks, within PingTimeout, that the Oozie d names (the
// installation's CELOS_DEFAULT_OOZIE) answers, when a workflow of p runs
// on it (an Oozie workflow without a url of its own). Run before any case
// starts: a submission to an Oozie that does not answer is retried, and
// the case would wait for its timeout with the slot READY. opts
// authenticate the client (oozie.HadoopClientOptions under Kerberos).
func CheckOozie(ctx context.Context, d *defaults.Defaults, p *workflow.Project, opts ...oozie.Option) error {
	if d == nil || d.Oozie == "" || !usesDefaultOozie(p) {
		return nil
	}
	c, err := oozie.NewClient(d.Oozie, append([]oozie.Option{oozie.WithTimeout(PingTimeout)}, opts...)...)
	if err != nil {
		return fmt.Errorf("CELOS_DEFAULT_OOZIE: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if _, err := c.Versions(ctx); err != nil {
		return fmt.Errorf("the Oozie of its defaults (CELOS_DEFAULT_OOZIE %s) does not answer, and workflow %s runs on it: %w", d.Oozie, firstDefaultOozie(p), err)
	}
	return nil
}

func usesDefaultOozie(p *workflow.Project) bool { return firstDefaultOozie(p) != "" }

// firstDefaultOozie is the id of the first workflow of p that runs on the
// default Oozie, "" if none does.
func firstDefaultOozie(p *workflow.Project) string {
	for _, w := range p.Workflows {
		if w.ExternalService.Type == workflow.ServiceOozie && w.ExternalService.URL == "" {
			return w.ID
		}
	}
	return ""
}
