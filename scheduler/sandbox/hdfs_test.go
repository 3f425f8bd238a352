package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/oozietest"
	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/hdfscheck"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

func TestMain(m *testing.M) { oozietest.Main(m) }

// touchWorkflow is the hourly workflow "touch": its hdfsCheck trigger
// waits for /in/<hour>/_READY, and Oozie runs oozietest.TouchApp deployed
// at appPath, which writes /out/<hour>/_SUCCESS.
func touchWorkflow(appPath string) workflow.Workflow {
	w := fixture.Hourly("touch")
	w.Trigger = workflow.Trigger{Type: workflow.TriggerHDFSCheck, Path: "/in/${year}${month}${day}${hour}/_READY"}
	w.ExternalService = fixture.Oozie(map[string]string{
		"oozie.wf.application.path": appPath,
		"outputDir":                 "/out/${year}${month}${day}${hour}",
	})
	w.ExternalService.URL = ""
	return w
}

// TestRunOnHDFSWithOozie runs test cases against the real HDFS mini
// cluster and a real Apache Oozie: the project's hdfs/ directory is
// deployed under each case's prefix on HDFS, inputs are written there,
// hdfsCheck triggers ask HDFS, Oozie runs the application from the
// prefix with its output path rewritten, the outputs are read back from
// HDFS and compared, and every prefix is removed afterwards. One case
// passes; one expects an hour outside its range and fails with the
// missing file named.
func TestRunOnHDFSWithOozie(t *testing.T) {
	env := oozietest.Shared(t)
	c := env.HDFS
	uri := "hdfs://" + c.Addr()
	hdfsDir := filepath.Join(t.TempDir(), "hdfs")
	if err := os.MkdirAll(filepath.Join(hdfsDir, "touch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hdfsDir, "touch", "workflow.xml"), []byte(oozietest.TouchApp), 0o644); err != nil {
		t.Fatal(err)
	}
	p := fixture.Project("p", touchWorkflow("${nameNode}/user/celos/app/p/touch"))
	d := &defaults.Defaults{HDFS: uri, Oozie: env.Oozie.URL(), OozieProperties: map[string]string{"user.name": c.User(), "nameNode": uri}}
	pool := targets.NewHDFSPool(nil, targets.HDFSOptions{Client: hadoopconf.Options{User: c.User()}})
	defer pool.Close()
	fsys, err := pool.FS(uri)
	if err != nil {
		t.Fatal(err)
	}
	checks := hdfscheck.New(nil, hdfscheck.Options{User: c.User()})
	defer checks.Close()
	mux := trigger.NewMux(uri)
	mux.Handle("hdfs", checks)
	base := "/" + t.Name()
	ready := []testcase.Input{{Path: "/in", Files: map[string]string{"2026010110/_READY": "", "2026010111/_READY": ""}}}
	pass := testcase.Case{Name: "two-hours", Start: day.Add(10 * time.Hour), End: day.Add(11 * time.Hour), Timeout: 3 * time.Minute,
		Inputs: ready, PathProperties: []string{"outputDir"},
		Outputs: []testcase.Output{{Path: "/out", Comparer: testcase.Comparer{Type: "plain"},
			Files: map[string]string{"2026010110/_SUCCESS": "", "2026010111/_SUCCESS": ""}}}}
	fail := pass
	fail.Name = "hour-outside-range"
	fail.End = day.Add(10 * time.Hour).Add(30 * time.Minute)
	res, err := Run(context.Background(), Options{
		Project: p, HDFSDir: hdfsDir, TempDir: t.TempDir(), Poll: 200 * time.Millisecond,
		Env: Env{FS: fsys, FSURI: uri, Base: base, Triggers: mux,
			Services: map[string]external.Service{workflow.ServiceOozie: oozie.NewService(d, nil)}},
	}, []testcase.Case{pass, fail})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Passed {
		t.Errorf("%s failed: %q", res[0].Name, res[0].Failures)
	}
	if !strings.HasPrefix(res[0].Prefix, base+"/celos-test-p-") {
		t.Errorf("prefix %s is not under %s", res[0].Prefix, base)
	}
	want := []string{
		"/out: 2026010111: expected a directory, missing from the output",
		"/out: 2026010111/_SUCCESS: expected a file (0 bytes), missing from the output",
	}
	if diff := cmp.Diff(want, res[1].Failures); diff != "" {
		t.Errorf("%s: failures (-want +got):\n%s", res[1].Name, diff)
	}
	left, err := c.Client().ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("left on HDFS under %s: %s", base, left[0].Name())
	}
}

// TestRunAgainstTarget runs a case against an installation named by a
// target file on a real OpenSSH server, as `celos test --target sftp://`
// does: the Hadoop configuration of the target (the mini cluster's, read
// over SFTP), the Oozie URL and properties of the defaults.json in its
// defaults directory (the real Oozie's), its hdfs.root.
func TestRunAgainstTarget(t *testing.T) {
	env := oozietest.Shared(t)
	c := env.HDFS
	uri := "hdfs://" + c.Addr()
	srv := sshtest.Start(t, sshtest.Options{})
	dir := srv.Root
	hdfsDir := filepath.Join(t.TempDir(), "project", "hdfs")
	for name, data := range map[string]string{
		hdfsDir + "/touch/workflow.xml": oozietest.TouchApp,
		dir + "/hadoop/core-site.xml":   c.CoreSite(t),
		dir + "/hadoop/hdfs-site.xml":   "<configuration/>\n",
		dir + "/defaults/defaults.json": `{"CELOS_DEFAULT_OOZIE": "` + env.Oozie.URL() + `",
			"CELOS_DEFAULT_OOZIE_PROPERTIES": {"user.name": "` + c.User() + `", "nameNode": "` + uri + `"}}`,
		dir + "/target.json": `{"hadoop.core-site.xml": "` + srv.URL(dir+"/hadoop/core-site.xml") + `",
			"hadoop.hdfs-site.xml": "` + srv.URL(dir+"/hadoop/hdfs-site.xml") + `",
			"workflows.dir.uri": "` + srv.URL(dir+"/workflows") + `",
			"defaults.dir.uri": "` + srv.URL(dir+"/defaults") + `",
			"hdfs.root": "/apps"}`,
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conn := targets.NewConnector(targets.SSHOptions{KnownHosts: []string{srv.KnownHostsPath},
		Identities: []string{srv.ClientKeyPath}, NoAgent: true}, hadoopconf.Options{})
	defer conn.Close()
	in, err := LoadInstallation(context.Background(), conn, srv.URL(dir+"/target.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(in.Source, "sftp://") || in.HDFSRoot != "/apps" || in.Defaults == nil || in.Defaults.Oozie != env.Oozie.URL() {
		t.Fatalf("installation: source %s, root %q, defaults %+v", in.Source, in.HDFSRoot, in.Defaults)
	}
	base := "/" + t.Name()
	tenv, closeEnv, err := TargetEnv(context.Background(), in, c.User(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer closeEnv()
	w := touchWorkflow("${nameNode}/apps/p/touch")
	cs := testcase.Case{Name: "one-hour", Start: day.Add(10 * time.Hour), End: day.Add(10*time.Hour + 30*time.Minute), Timeout: 3 * time.Minute,
		Inputs: []testcase.Input{{Path: "/in/2026010110", Files: map[string]string{"_READY": ""}}}, PathProperties: []string{"outputDir"},
		Outputs: []testcase.Output{{Path: "/out", Comparer: testcase.Comparer{Type: "plain"}, Files: map[string]string{"2026010110/_SUCCESS": ""}}}}
	res, err := Run(context.Background(), Options{Project: fixture.Project("p", w), HDFSDir: hdfsDir, HDFSRoot: in.HDFSRoot,
		TempDir: t.TempDir(), Poll: 200 * time.Millisecond, Env: tenv}, []testcase.Case{cs})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Passed {
		t.Errorf("failed: %q", res[0].Failures)
	}
	if left, err := c.Client().ReadDir(base); err != nil || len(left) > 0 {
		t.Errorf("left on HDFS under %s: %v %v", base, left, err)
	}
}
