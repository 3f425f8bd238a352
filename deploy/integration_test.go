package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

func TestMain(m *testing.M) { hdfstest.Main(m) }

// remote is a target on the real OpenSSH server: the target file, the
// Hadoop XML files and the workflows directory are all sftp: URLs.
type remote struct {
	srv       *sshtest.Server
	target    string
	wfDir     string // local path of the workflows dir (sshd runs here)
	hdfsRoot  string
	deployDir string
	project   *workflow.Project
	user      string // HDFS user
}

// newRemote writes the installation under srv.Root. coreSite is the
// content of its core-site.xml.
func newRemote(t *testing.T, srv *sshtest.Server, coreSite, hdfsRoot string) *remote {
	t.Helper()
	return newRemoteIn(t, srv, srv.Root, coreSite, hdfsRoot)
}

// newRemoteIn writes the installation under base, on srv.
func newRemoteIn(t testing.TB, srv *sshtest.Server, base, coreSite, hdfsRoot string) *remote {
	t.Helper()
	inst := filepath.Join(base, "etc")
	writeFiles(t, inst, map[string]string{
		"hadoop/core-site.xml": coreSite,
		"hadoop/hdfs-site.xml": "<configuration/>\n",
	})
	r := &remote{
		srv:       srv,
		wfDir:     filepath.Join(base, "celos", "workflows"),
		hdfsRoot:  hdfsRoot,
		deployDir: filepath.Join(t.TempDir(), "project"),
		project:   project("wordcount", "wordcount-lax", "wordcount-nyc"),
	}
	target := fmt.Sprintf(`{
  "hadoop.core-site.xml": %q,
  "hadoop.hdfs-site.xml": %q,
  "workflows.dir.uri": %q,
  "defaults.dir.uri": %q,
  "hdfs.root": %q
}`, srv.URL(inst+"/hadoop/core-site.xml"), srv.URL(inst+"/hadoop/hdfs-site.xml"), srv.URL(r.wfDir), srv.URL(base+"/celos/defaults"), hdfsRoot)
	writeFiles(t, base, map[string]string{"target.json": target})
	r.target = srv.URL(base + "/target.json")
	// An installed server's workflows and defaults directories exist
	// (deploy refuses missing ones: ErrMissingDir).
	for _, d := range []string{r.wfDir, filepath.Join(base, "celos", "defaults")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{
		"workflow.xml": "<workflow-app name='wordcount'/>\n",
		"lib/wc.jar":   strings.Repeat("jar", 100000),
	})
	return r
}

// newHDFSRemote is newRemote on a new OpenSSH server whose core-site.xml
// is the shared mini cluster's: the Oozie directory goes to HDFS under
// /<test name>/app, deployed as the cluster's superuser.
func newHDFSRemote(t *testing.T) (r *remote, cl *hdfstest.Cluster, root string) {
	t.Helper()
	cl = hdfstest.Shared(t)
	srv := sshtest.Start(t, sshtest.Options{})
	root = "/" + t.Name() + "/app"
	r = newRemote(t, srv, cl.CoreSite(t), root)
	r.user = cl.User()
	return r, cl, root
}

func (r *remote) options(t testing.TB) Options {
	conn := targets.NewConnector(targets.SSHOptions{
		KnownHosts: []string{r.srv.KnownHostsPath},
		Identities: []string{r.srv.ClientKeyPath},
		NoAgent:    true,
		Timeout:    10 * time.Second,
	}, hadoopconf.Options{User: r.user, DialTimeout: 5 * time.Second})
	t.Cleanup(func() { conn.Close() })
	return Options{
		Target:    r.target,
		DeployDir: r.deployDir,
		Connector: conn,
		Compile: func(string) (*workflow.Project, []string, error) {
			p := *r.project
			return &p, nil, nil
		},
	}
}

func (r *remote) workflowsFile(t *testing.T) string {
	data, err := os.ReadFile(filepath.Join(r.wfDir, "wordcount.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// hdfsTree reads a directory tree from HDFS.
func hdfsTree(t *testing.T, c *hdfs.Client, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := c.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			data, err := c.ReadFile(p)
			if err != nil {
				return err
			}
			out[strings.TrimPrefix(p, dir+"/")] = string(data)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hdfsNames(t *testing.T, c *hdfs.Client, dir string) []string {
	t.Helper()
	fis, err := c.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, fi := range fis {
		out = append(out, fi.Name())
	}
	return out
}

// TestDeployOpenSSHAndHDFS: the production shape. The target file and the
// Hadoop XML are fetched over SFTP from the real OpenSSH server, the
// workflows file goes there, and the Oozie directory goes to the real
// HDFS mini cluster. Deploy, redeploy with changes, dry run, undeploy.
func TestDeployOpenSSHAndHDFS(t *testing.T) {
	r, cl, root := newHDFSRemote(t)
	ctx := context.Background()
	c := cl.Client()

	res, err := Deploy(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.HDFSDir, "hdfs://") || res.Files != 2 {
		t.Fatalf("result %+v", res)
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, hdfsTree(t, c, root+"/wordcount"))); d != "" {
		t.Fatalf("HDFS (-want +got):\n%s", d)
	}
	if got := r.workflowsFile(t); got != marshal(t, r.project) {
		t.Fatalf("workflows file %s", got)
	}

	// Redeploy with changes; the dry run shows them first.
	r.project = project("wordcount", "wordcount-nyc")
	r.project.Workflows[0].Schedule.Cron = "0 15 * * * ?"
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{"lib/extra.jar": "extra", "workflow.xml": "<workflow-app name='WORDCOUNT'/>\n"})
	p, err := MakePlan(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.WorkflowsRemoved) != 1 || len(p.WorkflowsChanged) != 1 || p.WorkflowsChanged[0].Fields[0].Path != "schedule.cron" ||
		len(p.FilesAdded) != 1 || len(p.FilesChanged) != 1 || !strings.HasPrefix(p.HDFSDir, "hdfs://") {
		t.Fatalf("plan %+v", p)
	}
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, hdfsTree(t, c, root+"/wordcount"))); d != "" {
		t.Fatalf("HDFS after redeploy (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"wordcount"}, hdfsNames(t, c, root)); d != "" {
		t.Fatalf("HDFS root (-want +got):\n%s", d)
	}
	if got := r.workflowsFile(t); got != marshal(t, r.project) {
		t.Fatalf("workflows file after redeploy %s", got)
	}
	if p, err := MakePlan(ctx, r.options(t)); err != nil || p.HasChanges() {
		t.Fatalf("plan after redeploy: %+v %v", p, err)
	}

	// Undeploy.
	o := r.options(t)
	o.Project = "wordcount"
	res, err = Undeploy(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 3 || hdfsTree(t, c, root+"/wordcount") != nil {
		t.Fatalf("undeploy %+v", res)
	}
	if _, err := os.Stat(filepath.Join(r.wfDir, "wordcount.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("workflows file after undeploy: %v", err)
	}
}

// TestDeployOpenSSHLocalHDFS: fs.defaultFS file:/// on an sftp target puts
// the Oozie directory on the server's own disk, over SFTP.
func TestDeployOpenSSHLocalHDFS(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	ctx := context.Background()
	res, err := Deploy(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.HDFSDir, "sftp://") {
		t.Fatalf("result %+v", res)
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, tree(t, filepath.Join(srv.Root, "hdfs", "wordcount")))); d != "" {
		t.Fatalf("Oozie dir (-want +got):\n%s", d)
	}
	if p, err := MakePlan(ctx, r.options(t)); err != nil || p.HasChanges() {
		t.Fatalf("plan: %+v %v", p, err)
	}
}

// TestDeployHostKeyMismatch: a server whose key differs from known_hosts
// is refused before anything is read or written.
func TestDeployHostKeyMismatch(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	impostor := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	o := r.options(t)
	// known_hosts holds the impostor's key under the real server's name.
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(strings.Replace(impostor.KnownHostsLines()[0], impostor.Addr[strings.LastIndex(impostor.Addr, ":")+1:], srv.Addr[strings.LastIndex(srv.Addr, ":")+1:], 1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Connector.SSH.KnownHosts = []string{kh}
	_, err := Deploy(context.Background(), o)
	var he *targets.HostKeyError
	if !errors.As(err, &he) || !he.Changed || !strings.Contains(err.Error(), "HOST KEY CHANGED") {
		t.Fatalf("want a changed host key refusal, got %v", err)
	}
	if got := names(t, r.wfDir); len(got) != 0 {
		t.Fatalf("something was written: %v", got)
	}
}

// killingFS runs kill once, in the middle of the first big file's upload.
type killingFS struct {
	targets.FS
	once *sync.Once
	kill func()
}

func (k *killingFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error {
	if size > 4<<20 {
		r = &killAfter{r: r, n: 2 << 20, once: k.once, kill: k.kill}
	}
	return k.FS.WriteNew(ctx, name, r, size, durable)
}

type killAfter struct {
	r    io.Reader
	n    int64
	once *sync.Once
	kill func()
}

func (k *killAfter) Read(p []byte) (int, error) {
	if k.n <= 0 {
		k.once.Do(k.kill)
	}
	n, err := k.r.Read(p)
	k.n -= int64(n)
	return n, err
}

// TestDeploySSHDKilledMidUpload: sshd dies during the upload of a
// redeploy. The deploy fails naming the step, the previous deployment is
// intact, and once sshd is back a rerun succeeds (taking over the lock the
// dead deploy could not remove, and cleaning its partial upload).
func TestDeploySSHDKilledMidUpload(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	ctx := context.Background()
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	before := tree(t, filepath.Join(srv.Root, "celos"))
	beforeHDFS := tree(t, filepath.Join(srv.Root, "hdfs"))

	r.project = project("wordcount", "wordcount-v2")
	big := make([]byte, 32<<20)
	for i := range big {
		big[i] = byte(i)
	}
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{"lib/big.jar": string(big)})
	for i := 0; i < 100; i++ {
		writeFiles(t, filepath.Join(r.deployDir, "hdfs", "conf"), map[string]string{fmt.Sprintf("f%03d.xml", i): "<x/>"})
	}
	o := r.options(t)
	var once sync.Once
	o.Connector.Wrap = func(fsys targets.FS) targets.FS {
		return &killingFS{FS: fsys, once: &once, kill: func() { srv.Kill() }}
	}
	start := time.Now()
	_, err := Deploy(ctx, o)
	var se *StepError
	if !errors.As(err, &se) || se.Step != "upload HDFS directory" || !se.Intact {
		t.Fatalf("want an intact failure at the upload, got %v", err)
	}
	if !strings.Contains(err.Error(), "connection") || !strings.Contains(err.Error(), "previous deployment is intact") {
		t.Errorf("message: %v", err)
	}
	t.Logf("sshd killed: %v (after %s)", err, time.Since(start))
	if d := cmp.Diff(before["workflows/wordcount.json"], tree(t, filepath.Join(srv.Root, "celos"))["workflows/wordcount.json"]); d != "" {
		t.Fatalf("workflows file changed (-before +after):\n%s", d)
	}
	if d := cmp.Diff(subtree(beforeHDFS, "wordcount"), tree(t, filepath.Join(srv.Root, "hdfs", "wordcount"))); d != "" {
		t.Fatalf("Oozie dir changed (-before +after):\n%s", d)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	o = r.options(t)
	o.Warn = func(s string) { warnings = append(warnings, s) }
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if got := r.workflowsFile(t); got != marshal(t, r.project) {
		t.Fatal("rerun did not deploy the new workflows")
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, tree(t, filepath.Join(srv.Root, "hdfs", "wordcount")))); d != "" {
		t.Fatalf("Oozie dir after rerun (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, filepath.Join(srv.Root, "hdfs"))); d != "" {
		t.Fatalf("leftovers (-want +got):\n%s", d)
	}
	if len(warnings) == 0 || !strings.Contains(strings.Join(warnings, "\n"), "stale lock") {
		t.Errorf("warnings %v", warnings)
	}
}

func subtree(m map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if rest, ok := strings.CutPrefix(k, prefix+"/"); ok {
			out[rest] = v
		}
	}
	return out
}

// nameNodeFixture is a local installation (newFixture) whose Oozie
// directory goes to /apps/celos on a mini cluster of the test's own, for
// tests that stop or freeze its NameNode in the middle of a deploy.
type nameNodeFixture struct {
	*fixture
	cl          *hdfstest.Cluster
	callTimeout time.Duration // the connectors' HDFSCallTimeout (0: the default)
}

func newNameNodeFixture(t *testing.T, callTimeout time.Duration) *nameNodeFixture {
	t.Helper()
	cl := hdfstest.StartT(t, hdfstest.Options{})
	f := &nameNodeFixture{fixture: newFixture(t), cl: cl, callTimeout: callTimeout}
	writeFiles(t, filepath.Join(f.root, "installation", "conf"), map[string]string{"core-site.xml": cl.CoreSite(t)})
	f.hdfsRoot = "/apps/celos"
	return f
}

// newConn replaces the connector by a new one, which has no connection to
// the NameNode yet.
func (f *nameNodeFixture) newConn() {
	f.conn.Close()
	f.conn = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{User: f.cl.User(), DialTimeout: 5 * time.Second})
	f.conn.HDFSCallTimeout = f.callTimeout
}

// hdfsOptions are the fixture's options, deploying to its HDFS root.
func (f *nameNodeFixture) hdfsOptions() Options {
	o := f.options()
	o.HDFSRoot = f.hdfsRoot
	return o
}

// deployFirst deploys the project on a new connector and returns the
// Oozie directory on HDFS and the workflows file it left.
func (f *nameNodeFixture) deployFirst(t *testing.T) (map[string]string, string) {
	t.Helper()
	f.newConn()
	if _, err := Deploy(context.Background(), f.hdfsOptions()); err != nil {
		t.Fatal(err)
	}
	return hdfsTree(t, f.cl.Client(), f.hdfsRoot+"/wordcount"), tree(t, f.wfDir)["wordcount.json"]
}

// intactThenRerun checks, once the NameNode answers again, that the Oozie
// directory on HDFS is still before, and that a rerun on a new connector
// deploys the project whole and leaves nothing else in the HDFS root.
func (f *nameNodeFixture) intactThenRerun(t *testing.T, before map[string]string) {
	t.Helper()
	c, err := f.cl.NewClient(f.cl.User())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := cmp.Diff(before, hdfsTree(t, c, f.hdfsRoot+"/wordcount")); d != "" {
		t.Fatalf("Oozie dir changed (-before +after):\n%s", d)
	}
	f.newConn()
	if _, err := Deploy(context.Background(), f.hdfsOptions()); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if d := cmp.Diff(tree(t, filepath.Join(f.deployDir, "hdfs")), deployed(t, hdfsTree(t, c, f.hdfsRoot+"/wordcount"))); d != "" {
		t.Fatalf("after rerun (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"wordcount"}, hdfsNames(t, c, f.hdfsRoot)); d != "" {
		t.Fatalf("leftovers (-want +got):\n%s", d)
	}
}

// TestDeployNameNodeStopped: the NameNode goes down in the middle of a
// redeploy's upload, and is down when the next deploy starts. Both fail
// naming the step, the previous deployment stays intact, and a rerun after
// the NameNode is back succeeds.
func TestDeployNameNodeStopped(t *testing.T) {
	f := newNameNodeFixture(t, 0)
	cl := f.cl
	ctx := context.Background()
	before, beforeWF := f.deployFirst(t)

	f.project = project("wordcount", "wordcount-v2")
	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{"lib/big.jar": strings.Repeat("b", 8<<20)})
	f.newConn()
	var once sync.Once
	f.conn.Wrap = func(fsys targets.FS) targets.FS {
		return &killingFS{FS: fsys, once: &once, kill: func() {
			if err := cl.StopNameNode(ctx); err != nil {
				t.Error(err)
			}
		}}
	}
	_, err := Deploy(ctx, f.hdfsOptions())
	var se *StepError
	t.Logf("NameNode stopped mid-upload: %v", err)
	if !errors.As(err, &se) || se.Step != "upload HDFS directory" || !se.Intact {
		t.Fatalf("NameNode stopped mid-upload: want an intact failure at the upload, got %v", err)
	}
	if got := tree(t, f.wfDir)["wordcount.json"]; got != beforeWF {
		t.Fatal("workflows file changed")
	}

	// Still down: the next deploy fails at once, saying the NameNode is
	// unreachable.
	f.newConn()
	_, err = Deploy(ctx, f.hdfsOptions())
	t.Logf("NameNode down: %v", err)
	if !errors.As(err, &se) || se.Step != "connect to HDFS" || !se.Intact || !strings.Contains(err.Error(), cl.Addr()) {
		t.Fatalf("NameNode down: want an intact failure at connect, got %v", err)
	}

	if err := cl.StartNameNode(ctx); err != nil {
		t.Fatal(err)
	}
	f.intactThenRerun(t, before)
}

// TestDeployPermissionDenied: the deploying user may not write the HDFS
// root (the usual first-day mistake), or the server's workflows
// directory. Each deploy fails naming the step and the path, and changes
// nothing.
func TestDeployPermissionDenied(t *testing.T) {
	t.Run("HDFS root", func(t *testing.T) {
		r, cl, root := newHDFSRemote(t)
		if err := cl.Client().MkdirAll(root, 0o755); err != nil { // the superuser's
			t.Fatal(err)
		}
		r.user = "celos-intruder"
		_, err := Deploy(context.Background(), r.options(t))
		t.Logf("HDFS root not writable: %v", err)
		var se *StepError
		if !errors.As(err, &se) || se.Step != "upload HDFS directory" || !se.Intact {
			t.Fatalf("want an intact failure at the upload, got %v", err)
		}
		if !errors.Is(err, fs.ErrPermission) && !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("message does not say permission denied: %v", err)
		}
		if !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "as HDFS user celos-intruder") {
			t.Errorf("message does not name %s and the HDFS user: %v", root, err)
		}
		if got := hdfsNames(t, cl.Client(), root); len(got) != 0 {
			t.Errorf("HDFS root holds %v", got)
		}
		if _, err := os.Stat(filepath.Join(r.wfDir, "wordcount.json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("workflows file written: %v", err)
		}
	})
	t.Run("workflows directory", func(t *testing.T) {
		base := filepath.Join(t.TempDir(), "installation")
		wf := filepath.Join(base, "celos", "workflows")
		if err := os.MkdirAll(wf, 0o755); err != nil {
			t.Fatal(err)
		}
		var srv *sshtest.Server
		if os.Getuid() == 0 {
			// Root writes anywhere: deploy as another account (sshtest
			// creates celos-sftp-test) to an installation root owns.
			srv = sshtest.Start(t, sshtest.Options{User: "celos-sftp-test"})
			for d := base; d != "/"; d = filepath.Dir(d) {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			srv = sshtest.Start(t, sshtest.Options{})
		}
		r := newRemoteIn(t, srv, base, localCore, base+"/hdfs")
		if os.Getuid() != 0 {
			if err := os.Chmod(wf, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(wf, 0o755) })
		}
		_, err := Deploy(context.Background(), r.options(t))
		t.Logf("workflows directory not writable: %v", err)
		var se *StepError
		if !errors.As(err, &se) || se.Step != "lock" || !se.Intact {
			t.Fatalf("want an intact failure at the lock, got %v", err)
		}
		if !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), r.wfDir) {
			t.Errorf("message does not say permission denied on %s: %v", r.wfDir, err)
		}
		if got := names(t, r.wfDir); len(got) != 0 {
			t.Errorf("workflows dir holds %v", got)
		}
	})
}

// TestDeploySharedHDFSRootOpenSSHAndHDFS: two installations on the real
// OpenSSH server share an HDFS root on the real HDFS mini cluster (as a
// typo'd workflows.dir.uri does). The Oozie directory the first deployed
// is neither swapped by a deploy nor removed by an undeploy through the
// second, and plan says why; a workflow id another project of the same
// workflows directory owns is refused over SFTP too. Every refusal leaves
// both installations and HDFS as they were.
func TestDeploySharedHDFSRootOpenSSHAndHDFS(t *testing.T) {
	cl := hdfstest.Shared(t)
	core := cl.CoreSite(t)
	srv := sshtest.Start(t, sshtest.Options{})
	root := "/" + t.Name() + "/app"
	a := newRemoteIn(t, srv, filepath.Join(srv.Root, "a"), core, root)
	b := newRemoteIn(t, srv, filepath.Join(srv.Root, "b"), core, root)
	a.user, b.user = cl.User(), cl.User()
	ctx := context.Background()
	c := cl.Client()
	if _, err := Deploy(ctx, a.options(t)); err != nil {
		t.Fatal(err)
	}
	hdfsBefore := hdfsTree(t, c, root)
	localBefore := tree(t, srv.Root)
	intact := func(what string) {
		t.Helper()
		if diff := cmp.Diff(hdfsBefore, hdfsTree(t, c, root)); diff != "" {
			t.Fatalf("%s changed HDFS (-before +after):\n%s", what, diff)
		}
		if diff := cmp.Diff(localBefore, tree(t, srv.Root)); diff != "" {
			t.Fatalf("%s changed the installations (-before +after):\n%s", what, diff)
		}
	}
	b.project = project("wordcount", "wordcount-b")
	_, err := Deploy(ctx, b.options(t))
	if !errors.Is(err, ErrOwnedElsewhere) || !strings.Contains(err.Error(), a.wfDir) {
		t.Fatalf("deploy through b: want ErrOwnedElsewhere naming %s, got %v", a.wfDir, err)
	}
	intact("a refused deploy")
	if _, err := MakePlan(ctx, b.options(t)); !errors.Is(err, ErrOwnedElsewhere) {
		t.Fatalf("plan through b: %v", err)
	}
	o := b.options(t)
	o.Project = "wordcount"
	if _, err := Undeploy(ctx, o); !errors.Is(err, ErrOwnedElsewhere) {
		t.Fatalf("undeploy through b: %v", err)
	}
	intact("a refused undeploy")

	// Another project of a's workflows directory reusing an id.
	o = a.options(t)
	o.Compile = func(string) (*workflow.Project, []string, error) { return project("other", "wordcount-nyc"), nil, nil }
	o.DeployDir = t.TempDir()
	_, err = Deploy(ctx, o)
	if !errors.Is(err, ErrIDClash) || !strings.Contains(err.Error(), `"wordcount-nyc"`) || !strings.Contains(err.Error(), "sftp://") {
		t.Fatalf("clash over SFTP: %v", err)
	}
	intact("a refused clash")

	// a still undeploys its own.
	o = a.options(t)
	o.Project = "wordcount"
	if _, err := Undeploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if got := hdfsTree(t, c, root+"/wordcount"); got != nil {
		t.Fatalf("after undeploy through a: %v", keys(got))
	}
}
