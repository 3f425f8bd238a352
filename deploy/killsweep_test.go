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
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// killAtParams is what the parent of TestDeployKilledAtEveryChange tells
// its child: where to deploy, and before which change of the target to
// kill itself.
type killAtParams struct {
	Target, KnownHosts, Key, DeployDir, User string
	Project                                  *workflow.Project
	At                                       int64
	Undeploy                                 bool
}

const killAtEnv = "CELOS_TEST_KILL_AT"

// killingAtFS SIGKILLs its own process before the at-th change it is
// asked to make (a write, link, time set, rename, removal or mkdir),
// keeping the times of the file system it wraps (linkingKillFS its links
// and real paths too).
type killingAtFS struct {
	targets.FS
	at    int64
	count *atomic.Int64
}

func (k *killingAtFS) change() {
	if k.count.Add(1) == k.at {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

func (k *killingAtFS) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error {
	k.change()
	return k.FS.WriteNew(ctx, name, r, size, durable)
}
func (k *killingAtFS) Rename(from, to string) error { k.change(); return k.FS.Rename(from, to) }
func (k *killingAtFS) Remove(name string) error     { k.change(); return k.FS.Remove(name) }
func (k *killingAtFS) RemoveAll(name string) error  { k.change(); return k.FS.RemoveAll(name) }
func (k *killingAtFS) MkdirAll(name string) error   { k.change(); return k.FS.MkdirAll(name) }

// linkingKillFS is killingAtFS on a file system with hard links and
// real paths (the local disk, OpenSSH).
type linkingKillFS struct{ *killingAtFS }

func (k linkingKillFS) Link(oldname, newname string) error {
	k.change()
	return k.FS.(targets.Linker).Link(oldname, newname)
}
func (k *killingAtFS) SetModTime(name string, mtime time.Time) error {
	k.change()
	return k.FS.(targets.TimeSetter).SetModTime(name, mtime)
}
func (k linkingKillFS) RealPath(name string) (string, error) {
	return k.FS.(targets.RealPather).RealPath(name)
}

// killAtChild is the child of the kill sweeps: the deploy of
// killAtParams, killed before its At-th change.
func killAtChild() error {
	var p killAtParams
	if err := json.Unmarshal([]byte(os.Getenv(killAtEnv)), &p); err != nil {
		return err
	}
	conn := targets.NewConnector(targets.SSHOptions{KnownHosts: []string{p.KnownHosts}, Identities: []string{p.Key}, NoAgent: true, Timeout: 10 * time.Second},
		hadoopconf.Options{User: p.User, DialTimeout: 5 * time.Second})
	var count atomic.Int64
	conn.Wrap = func(fsys targets.FS) targets.FS {
		k := &killingAtFS{FS: fsys, at: p.At, count: &count}
		if _, ok := fsys.(targets.Linker); ok {
			return linkingKillFS{k}
		}
		return k
	}
	o := Options{Target: p.Target, DeployDir: p.DeployDir, Connector: conn, Parallel: 1,
		Compile: func(string) (*workflow.Project, []string, error) { q := *p.Project; return &q, nil, nil }}
	var err error
	if p.Undeploy {
		o.Project = p.Project.Project
		_, err = Undeploy(context.Background(), o)
	} else {
		_, err = Deploy(context.Background(), o)
	}
	return err
}

// runKilledAt starts the child deploying r's project killed before its
// at-th change, and reports whether it was killed (else it ran to the
// end).
func runKilledAt(t *testing.T, r *remote, at int64, undeploy bool) (killed bool) {
	t.Helper()
	params, _ := json.Marshal(killAtParams{Target: r.target, KnownHosts: r.srv.KnownHostsPath, Key: r.srv.ClientKeyPath,
		DeployDir: r.deployDir, User: r.user, Project: r.project, At: at, Undeploy: undeploy})
	t.Setenv(killAtEnv, string(params))
	p := child.Start(t, 4<<30, nil)
	deadline := time.Now().Add(2 * time.Minute)
	for exited, _ := p.Exited(); !exited; exited, _ = p.Exited() {
		if time.Now().After(deadline) {
			t.Fatalf("the child did not end within 2 minutes:\n%s", p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := p.Exited()
	killed = err != nil && strings.Contains(err.Error(), "killed")
	if err != nil && !killed {
		t.Fatalf("the child failed: %v\n%s", err, p.Output())
	}
	return killed
}

// TestDeployKilledAtEveryChange: an incremental redeploy on the real
// OpenSSH server (file:///, hard links) is killed with SIGKILL before
// each change it makes to the target in turn, from the lock to the clean
// up, until one runs to the end. After each kill the live Oozie directory
// is complete, the old one or the new one (missing only inside the swap,
// with the old one beside it), and the workflows file never is newer
// than it. The next deploy then recovers (stale lock, leftovers, an
// interrupted swap) and leaves exactly the new deployment, every file
// with one link (no inode shared with a removed deployment), nothing
// else; and a deploy after it changes nothing.
func TestDeployKilledAtEveryChange(t *testing.T) {
	if child.Is(t) {
		child.Start(t, 4<<30, killAtChild)
		return
	}
	v1 := map[string]string{"conf/a.xml": "<a/>\n", "conf/b.xml": "<b/>\n", "workflow.xml": "<workflow-app name='v1'/>\n"}
	v2 := map[string]string{"conf/a.xml": "<a/>\n", "conf/c.xml": "<c/>\n", "workflow.xml": "<workflow-app name='v2'/>\n"}
	for at := int64(1); ; at++ {
		if at > 100 {
			t.Fatal("the deploy was still killed at its 100th change")
		}
		if killDeployAt(t, at, v1, v2) {
			return
		}
	}
}

// killDeployAt is one round of TestDeployKilledAtEveryChange: the deploy
// killed before its at-th change, checked, and recovered. It reports
// whether the deploy ran to the end instead.
func killDeployAt(t *testing.T, at int64, v1, v2 map[string]string) (ranToEnd bool) {
	srv := sshtest.Start(t, sshtest.Options{})
	defer srv.Stop()
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	hdfsDir := filepath.Join(r.deployDir, "hdfs")
	os.RemoveAll(hdfsDir)
	writeFiles(t, hdfsDir, v1)
	ctx := context.Background()
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	wf1 := r.workflowsFile(t)
	os.RemoveAll(hdfsDir)
	writeFiles(t, hdfsDir, v2)
	r.project = project("wordcount", "wordcount-v2")
	wf2 := marshal(t, r.project)

	killed := runKilledAt(t, r, at, false)

	live := filepath.Join(srv.Root, "hdfs", "wordcount")
	got := tree(t, live)
	delete(got, OwnerFile)
	wf := r.workflowsFile(t)
	switch {
	case len(got) == 0:
		if !hasPrefixIn(names(t, filepath.Join(srv.Root, "hdfs")), ".wordcount.old-") {
			t.Fatalf("killed at change %d: the live Oozie directory is gone and no previous one is beside it", at)
		}
		if wf != wf1 {
			t.Fatalf("killed at change %d: the new workflows file without its Oozie directory", at)
		}
	case cmp.Equal(got, v1):
		if wf != wf1 {
			t.Fatalf("killed at change %d: the new workflows file runs against the old Oozie directory", at)
		}
	case cmp.Equal(got, v2):
	default:
		t.Fatalf("killed at change %d: the live Oozie directory is neither the old nor the new one: %v", at, got)
	}
	if wf != wf1 && wf != wf2 {
		t.Fatalf("killed at change %d: the workflows file is neither the old nor the new one", at)
	}

	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatalf("killed at change %d, the rerun: %v", at, err)
	}
	if d := cmp.Diff(v2, deployed(t, tree(t, live))); d != "" {
		t.Fatalf("killed at change %d, after the rerun (-want +got):\n%s", at, d)
	}
	if r.workflowsFile(t) != wf2 {
		t.Fatalf("killed at change %d, after the rerun: not the new workflows file", at)
	}
	for rel := range v2 {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(live, rel), &st); err != nil || st.Nlink != 1 {
			t.Errorf("killed at change %d, after the rerun: %s has %d links (%v)", at, rel, st.Nlink, err)
		}
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, filepath.Join(srv.Root, "hdfs"))); d != "" {
		t.Errorf("killed at change %d, HDFS root after the rerun (-want +got):\n%s", at, d)
	}
	if d := cmp.Diff([]string{"wordcount.manifest.json"}, names(t, filepath.Join(r.wfDir, StateDir))); d != "" {
		t.Errorf("killed at change %d, state directory after the rerun (-want +got):\n%s", at, d)
	}
	if d := cmp.Diff([]string{StateDir, "wordcount.json"}, names(t, r.wfDir)); d != "" {
		t.Errorf("killed at change %d, workflows directory after the rerun (-want +got):\n%s", at, d)
	}
	res, err := Deploy(ctx, r.options(t))
	if err != nil || !res.HDFSUnchanged || !res.WorkflowsUnchanged {
		t.Errorf("killed at change %d, a deploy after the rerun changed something: %+v %v", at, res, err)
	}
	if !killed {
		t.Logf("the deploy ran to the end: it makes %d changes", at-1)
	}
	return !killed
}

// hasPrefixIn reports whether a name starts with prefix.
func hasPrefixIn(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// TestDeployKilledAtEveryChangeHDFS: the same sweep with the Oozie
// directory on the real HDFS mini cluster (no hard links: a changed
// project is uploaded whole; renames and removals on the NameNode).
func TestDeployKilledAtEveryChangeHDFS(t *testing.T) {
	if child.Is(t) {
		child.Start(t, 4<<30, killAtChild)
		return
	}
	cl := hdfstest.Shared(t)
	c := cl.Client()
	v1 := map[string]string{"conf/a.xml": "<a/>\n", "conf/b.xml": "<b/>\n", "workflow.xml": "<workflow-app name='v1'/>\n"}
	v2 := map[string]string{"conf/a.xml": "<a/>\n", "conf/c.xml": "<c/>\n", "workflow.xml": "<workflow-app name='v2'/>\n"}
	for at := int64(1); ; at++ {
		if at > 100 {
			t.Fatal("the deploy was still killed at its 100th change")
		}
		srv := sshtest.Start(t, sshtest.Options{})
		root := fmt.Sprintf("/%s/%d/app", t.Name(), at)
		r := newRemote(t, srv, cl.CoreSite(t), root)
		r.user = cl.User()
		hdfsDir := filepath.Join(r.deployDir, "hdfs")
		os.RemoveAll(hdfsDir)
		writeFiles(t, hdfsDir, v1)
		ctx := context.Background()
		if _, err := Deploy(ctx, r.options(t)); err != nil {
			t.Fatal(err)
		}
		wf1 := r.workflowsFile(t)
		os.RemoveAll(hdfsDir)
		writeFiles(t, hdfsDir, v2)
		r.project = project("wordcount", "wordcount-v2")
		wf2 := marshal(t, r.project)
		killed := runKilledAt(t, r, at, false)

		live := root + "/wordcount"
		got := hdfsTree(t, c, live)
		delete(got, OwnerFile)
		wf := r.workflowsFile(t)
		switch {
		case len(got) == 0:
			if !hasPrefixIn(hdfsNames(t, c, root), ".wordcount.old-") || wf != wf1 {
				t.Fatalf("killed at change %d: the live Oozie directory is gone (previous one beside it: %v, old workflows file: %v)",
					at, hasPrefixIn(hdfsNames(t, c, root), ".wordcount.old-"), wf == wf1)
			}
		case cmp.Equal(got, v1):
			if wf != wf1 {
				t.Fatalf("killed at change %d: the new workflows file runs against the old Oozie directory", at)
			}
		case cmp.Equal(got, v2):
		default:
			t.Fatalf("killed at change %d: the live Oozie directory is neither the old nor the new one: %v", at, got)
		}
		if _, err := Deploy(ctx, r.options(t)); err != nil {
			t.Fatalf("killed at change %d, the rerun: %v", at, err)
		}
		if d := cmp.Diff(v2, deployed(t, hdfsTree(t, c, live))); d != "" {
			t.Fatalf("killed at change %d, after the rerun (-want +got):\n%s", at, d)
		}
		if r.workflowsFile(t) != wf2 {
			t.Fatalf("killed at change %d, after the rerun: not the new workflows file", at)
		}
		if d := cmp.Diff([]string{"wordcount"}, hdfsNames(t, c, root)); d != "" {
			t.Fatalf("killed at change %d, HDFS root after the rerun (-want +got):\n%s", at, d)
		}
		if res, err := Deploy(ctx, r.options(t)); err != nil || !res.HDFSUnchanged || !res.WorkflowsUnchanged {
			t.Fatalf("killed at change %d, a deploy after the rerun changed something: %+v %v", at, res, err)
		}
		srv.Stop()
		if !killed {
			t.Logf("the deploy ran to the end: it makes %d changes", at-1)
			return
		}
	}
}

// TestUndeployKilledAtEveryChange: an undeploy on the real OpenSSH server
// (file:///) is killed before each of its changes in turn. The workflows
// file goes first: whenever the Oozie directory is not whole any more,
// the server has no workflow left to run against it. Rerun, the undeploy
// removes the rest (lock, directory, manifest, leftovers); a deploy then
// works and plan sees no change.
func TestUndeployKilledAtEveryChange(t *testing.T) {
	if child.Is(t) {
		child.Start(t, 4<<30, killAtChild)
		return
	}
	v1 := map[string]string{"conf/a.xml": "<a/>\n", "lib/wc.jar": "jar", "workflow.xml": "<workflow-app name='v1'/>\n"}
	for at := int64(1); ; at++ {
		if at > 100 {
			t.Fatal("the undeploy was still killed at its 100th change")
		}
		srv := sshtest.Start(t, sshtest.Options{})
		r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
		hdfsDir := filepath.Join(r.deployDir, "hdfs")
		os.RemoveAll(hdfsDir)
		writeFiles(t, hdfsDir, v1)
		ctx := context.Background()
		if _, err := Deploy(ctx, r.options(t)); err != nil {
			t.Fatal(err)
		}
		killed := runKilledAt(t, r, at, true)

		live := filepath.Join(srv.Root, "hdfs", "wordcount")
		got := tree(t, live)
		delete(got, OwnerFile)
		_, wfErr := os.Stat(filepath.Join(r.wfDir, "wordcount.json"))
		if !cmp.Equal(got, v1) && wfErr == nil {
			t.Fatalf("killed at change %d: the workflows file is still there, its Oozie directory not whole: %v", at, got)
		}
		o := r.options(t)
		o.Project = "wordcount"
		if _, err := Undeploy(ctx, o); err != nil {
			t.Fatalf("killed at change %d, the rerun: %v", at, err)
		}
		for _, dir := range []string{filepath.Join(srv.Root, "hdfs"), filepath.Join(r.wfDir, StateDir)} {
			if n := names(t, dir); len(n) != 0 {
				t.Fatalf("killed at change %d, after the rerun %s holds %v", at, dir, n)
			}
		}
		if d := cmp.Diff([]string{StateDir}, names(t, r.wfDir)); d != "" {
			t.Fatalf("killed at change %d, workflows directory after the rerun (-want +got):\n%s", at, d)
		}
		if _, err := Deploy(ctx, r.options(t)); err != nil {
			t.Fatalf("killed at change %d, a deploy after the rerun: %v", at, err)
		}
		if p, err := MakePlan(ctx, r.options(t)); err != nil || p.HasChanges() {
			t.Fatalf("killed at change %d, plan after the new deploy: %+v %v", at, p, err)
		}
		srv.Stop()
		if !killed {
			t.Logf("the undeploy ran to the end: it makes %d changes", at-1)
			return
		}
	}
}
