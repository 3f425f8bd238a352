package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strings"

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

// HDFSEnv is the Env of sandboxes on the HDFS at uri (hdfs://host:port,
// reached with an empty Hadoop configuration as user; "" means
// $HADOOP_USER_NAME, else the OS user) under base, with the Oozie of d if
// d names one (nil: none). Close releases its connections.
func HDFSEnv(uri, user, base string, d *defaults.Defaults) (Env, func(), error) {
	return hdfsEnv(nil, uri, user, base, d)
}

func hdfsEnv(conf hadoopconf.Conf, uri, user, base string, d *defaults.Defaults) (Env, func(), error) {
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
	checks := hdfscheck.New(conf, hdfscheck.Options{User: user})
	def := uri
	if d != nil && d.HDFS != "" {
		def = d.HDFS
	}
	mux := trigger.NewMux(def)
	mux.Handle("hdfs", checks)
	env := Env{FS: fsys, FSURI: uri, Base: base, Triggers: mux}
	if d != nil && d.Oozie != "" {
		env.Services = map[string]external.Service{workflow.ServiceOozie: oozie.NewService(d, nil)}
	}
	return env, func() {
		checks.Close()
		pool.Close()
	}, nil
}

// Installation is what a target file says about an installation, for
// TargetEnv.
type Installation struct {
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
	in := &Installation{Conf: conf, HDFSRoot: t.HDFSRoot}
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

// TargetEnv is the Env of sandboxes on the installation's HDFS (its
// defaults' CELOS_DEFAULT_HDFS, else fs.defaultFS) under base, with its
// Oozie; an installation whose file system is file: gets sandboxes on the
// local disk.
func TargetEnv(in *Installation, user, base string) (Env, func(), error) {
	uri := ""
	if in.Defaults != nil {
		uri = in.Defaults.HDFS
	}
	if uri == "" {
		var err error
		if uri, err = in.Conf.DefaultFS(); err != nil {
			return Env{}, nil, err
		}
	}
	if strings.HasPrefix(uri, "file:") {
		// An installation on the local disk (the demo's): sandboxes there
		// too, with its Oozie if its defaults name one.
		env := Env{}
		if in.Defaults != nil && in.Defaults.Oozie != "" {
			env.Services = map[string]external.Service{workflow.ServiceOozie: oozie.NewService(in.Defaults, nil)}
		}
		return env, func() {}, nil
	}
	if !strings.HasPrefix(uri, "hdfs://") {
		return Env{}, nil, fmt.Errorf("the target's file system is %s: celos test runs on hdfs:// and file: ones", uri)
	}
	return hdfsEnv(in.Conf, uri, user, base, in.Defaults)
}
