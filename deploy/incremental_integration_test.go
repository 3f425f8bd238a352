package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// TestDeployIncrementalOpenSSH: against the real OpenSSH server (the
// Oozie directory on its disk, fs.defaultFS file:///), an unchanged
// redeploy writes nothing, a one-file change sends that file and
// hard-links the others server-side (hardlink@openssh.com: the inode is
// kept), and a live file rewritten on the server behind deploy's back is
// noticed and replaced.
func TestDeployIncrementalOpenSSH(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	ctx := context.Background()
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(srv.Root, "hdfs", "wordcount")
	dirIno, jarIno := inode(t, live), inode(t, filepath.Join(live, "lib/wc.jar"))

	res, err := Deploy(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sent{HDFSUnchanged: true, WorkflowsUnchanged: true}, sentOf(res)); d != "" {
		t.Fatalf("unchanged redeploy (-want +got):\n%s", d)
	}
	if inode(t, live) != dirIno {
		t.Fatal("an unchanged redeploy swapped the Oozie directory")
	}

	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{"workflow.xml": "<workflow-app name='v2'/>\n"})
	r.project = project("wordcount", "wordcount-v2")
	res, err = Deploy(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sent{Files: 1, Bytes: 26}, sentOf(res)); d != "" {
		t.Fatalf("one file changed (-want +got):\n%s", d)
	}
	if inode(t, filepath.Join(live, "lib/wc.jar")) != jarIno {
		t.Fatal("lib/wc.jar was uploaded again, not hard-linked")
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, tree(t, live))); d != "" {
		t.Fatalf("Oozie dir (-want +got):\n%s", d)
	}
	if got := r.workflowsFile(t); got != marshal(t, r.project) {
		t.Fatalf("workflows file %s", got)
	}

	// Rewritten on the server, same size, right after the deploy.
	writeFiles(t, live, map[string]string{"lib/wc.jar": strings.Repeat("JAR", 100000)})
	res, err = Deploy(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.HDFSUnchanged || res.FilesSent != 1 {
		t.Fatalf("after a remote change: %+v", sentOf(res))
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, tree(t, live))); d != "" {
		t.Fatalf("Oozie dir after a remote change (-want +got):\n%s", d)
	}
}

// TestDeployIncrementalHDFS: on the real HDFS mini cluster an unchanged
// redeploy writes nothing; a file changed on HDFS behind deploy's back is
// noticed; a changed project is uploaded whole (HDFS has no hard links:
// docs/deploy.md).
func TestDeployIncrementalHDFS(t *testing.T) {
	r, cl, root := newHDFSRemote(t)
	ctx := context.Background()
	c := cl.Client()
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	before, err := c.Stat(root + "/wordcount")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Deploy(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sent{HDFSUnchanged: true, WorkflowsUnchanged: true}, sentOf(res)); d != "" {
		t.Fatalf("unchanged redeploy (-want +got):\n%s", d)
	}
	after, err := c.Stat(root + "/wordcount")
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("an unchanged redeploy touched the Oozie directory")
	}

	// Rewritten on HDFS, same size.
	if err := c.Remove(root + "/wordcount/workflow.xml"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Create(root + "/wordcount/workflow.xml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "<workflow-app name='WORDCOUNT'/>\n"); err != nil {
		t.Fatal(err)
	}
	for err := w.Close(); err != nil; err = w.Close() {
		if !hdfs.IsErrReplicating(err) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the NameNode has not seen the replica yet
	}
	res, err = Deploy(ctx, r.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.HDFSUnchanged || res.FilesSent != 2 {
		t.Fatalf("after a change on HDFS: %+v (want the whole tree sent)", sentOf(res))
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, hdfsTree(t, c, root+"/wordcount"))); d != "" {
		t.Fatalf("HDFS (-want +got):\n%s", d)
	}
	if res, err := Deploy(ctx, r.options(t)); err != nil || !res.HDFSUnchanged {
		t.Fatalf("redeploy after the repair: %+v %v", res, err)
	}
}

// killParams is what the parent of TestDeployIncrementalKilled tells its
// child: where to deploy, and where to say it is in the middle.
type killParams struct {
	Target, KnownHosts, Key, DeployDir, Marker string
	Project                                    *workflow.Project
}

const killParamsEnv = "CELOS_TEST_KILL_PARAMS"

// pausingFS stops the deploy for good once it has put n files into the
// new directory (links and uploads), after writing the marker file.
type pausingFS struct {
	targets.FS
	n      int64
	count  atomic.Int64
	marker string
}

func (p *pausingFS) step(name string) {
	if strings.Contains(name, ".wordcount.tmp-") && p.count.Add(1) > p.n {
		_ = os.WriteFile(p.marker, []byte("paused\n"), 0o644)
		select {} // until kill -9
	}
}

func (p *pausingFS) Link(oldname, newname string) error {
	p.step(newname)
	return p.FS.(targets.Linker).Link(oldname, newname)
}

func (p *pausingFS) SetModTime(name string, mtime time.Time) error {
	return p.FS.(targets.TimeSetter).SetModTime(name, mtime)
}

func (p *pausingFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error {
	p.step(name)
	return p.FS.WriteNew(ctx, name, r, size, durable)
}

// TestDeployIncrementalKilled: an incremental deploy killed with SIGKILL
// in the middle of building the new directory (some files linked, some
// uploaded) leaves the live tree complete and unchanged; the next deploy
// removes the leftovers, takes over the dead deploy's lock and deploys
// incrementally.
func TestDeployIncrementalKilled(t *testing.T) {
	if child.Is(t) {
		child.Start(t, 4<<30, func() error {
			var p killParams
			if err := json.Unmarshal([]byte(os.Getenv(killParamsEnv)), &p); err != nil {
				return err
			}
			conn := targets.NewConnector(targets.SSHOptions{KnownHosts: []string{p.KnownHosts}, Identities: []string{p.Key}, NoAgent: true, Timeout: 10 * time.Second}, hadoopconf.Options{DialTimeout: 5 * time.Second})
			conn.Wrap = func(fsys targets.FS) targets.FS { return &pausingFS{FS: fsys, n: 40, marker: p.Marker} }
			_, err := Deploy(context.Background(), Options{Target: p.Target, DeployDir: p.DeployDir, Connector: conn,
				Compile: func(string) (*workflow.Project, []string, error) { q := *p.Project; return &q, nil, nil }})
			return fmt.Errorf("the deploy was not paused: %v", err)
		})
		return
	}
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	files := map[string]string{}
	for i := 0; i < 100; i++ {
		files[fmt.Sprintf("conf/f%03d.xml", i)] = strings.Repeat(fmt.Sprint(i), 500)
	}
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), files)
	ctx := context.Background()
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	before := tree(t, filepath.Join(srv.Root, "celos", "workflows"))
	live := filepath.Join(srv.Root, "hdfs", "wordcount")
	beforeHDFS := tree(t, live)

	// Ten files change: the rest is linked.
	for i := 0; i < 100; i += 10 {
		files[fmt.Sprintf("conf/f%03d.xml", i)] = "changed"
	}
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), files)
	r.project = project("wordcount", "wordcount-v2")
	marker := filepath.Join(t.TempDir(), "paused")
	params, _ := json.Marshal(killParams{Target: r.target, KnownHosts: srv.KnownHostsPath, Key: srv.ClientKeyPath,
		DeployDir: r.deployDir, Marker: marker, Project: r.project})
	t.Setenv(killParamsEnv, string(params))
	p := child.Start(t, 4<<30, nil)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if exited, err := p.Exited(); exited {
			t.Fatalf("the child ended before it paused (%v):\n%s", err, p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not pause within 2 minutes:\n%s", p.Output())
		}
	}
	p.Kill()

	if d := cmp.Diff(beforeHDFS, tree(t, live)); d != "" {
		t.Fatalf("live Oozie dir after kill -9 (-before +after):\n%s", d)
	}
	afterWF := tree(t, filepath.Join(srv.Root, "celos", "workflows"))
	if _, ok := afterWF[".celos-deploy/wordcount.lock"]; !ok {
		t.Fatal("the killed deploy left no lock: was it killed holding it?")
	}
	delete(afterWF, ".celos-deploy/wordcount.lock")
	if d := cmp.Diff(before, afterWF); d != "" {
		t.Fatalf("workflows dir after kill -9 (-before +after):\n%s", d)
	}
	leftovers := names(t, filepath.Join(srv.Root, "hdfs"))
	if len(leftovers) != 2 || !strings.HasPrefix(leftovers[0], ".wordcount.tmp-") {
		t.Fatalf("HDFS root after kill -9: %v, want the live directory and the partial one", leftovers)
	}

	var warnings []string
	o := r.options(t)
	o.Warn = func(s string) { warnings = append(warnings, s) }
	res, err := Deploy(ctx, o)
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if res.FilesSent != 10 {
		t.Errorf("rerun sent %d files, want the 10 changed", res.FilesSent)
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, tree(t, live))); d != "" {
		t.Fatalf("Oozie dir after the rerun (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, filepath.Join(srv.Root, "hdfs"))); d != "" {
		t.Fatalf("leftovers after the rerun (-want +got):\n%s", d)
	}
	if got := r.workflowsFile(t); got != marshal(t, r.project) {
		t.Fatal("the rerun did not write the new workflows")
	}
	if !strings.Contains(strings.Join(warnings, "\n"), "stale lock") {
		t.Errorf("warnings %v: want the dead deploy's lock taken over", warnings)
	}
}
