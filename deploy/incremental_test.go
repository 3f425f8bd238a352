package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/cache"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// inode returns a file's inode number: a hard-linked file keeps it.
func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// sent is what a deploy reported uploading, and whether it kept both sides.
type sent struct {
	Files              int
	Bytes              int64
	HDFSUnchanged      bool
	WorkflowsUnchanged bool
}

func sentOf(r *Result) sent {
	return sent{r.FilesSent, r.BytesSent, r.HDFSUnchanged, r.WorkflowsUnchanged}
}

// TestDeployIncrementalLocal: a redeploy with nothing changed writes
// nothing (no upload, no swap: the live directory is the same one, and
// no workflows file is rewritten); a one-file change sends that file and
// hard-links the others from the live directory into the new one.
func TestDeployIncrementalLocal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	res, err := Deploy(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sent{Files: 3, Bytes: 3000 + 1 + 33}, sentOf(res)); d != "" {
		t.Fatalf("first deploy (-want +got):\n%s", d)
	}
	live := filepath.Join(f.hdfsRoot, "wordcount")
	dirIno, jarIno := inode(t, live), inode(t, filepath.Join(live, "lib/wc.jar"))
	wfIno := inode(t, filepath.Join(f.wfDir, "wordcount.json"))
	manifest := filepath.Join(f.wfDir, StateDir, "wordcount.manifest.json")
	mIno := inode(t, manifest)

	res, err = Deploy(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sent{HDFSUnchanged: true, WorkflowsUnchanged: true}, sentOf(res)); d != "" {
		t.Fatalf("unchanged redeploy (-want +got):\n%s", d)
	}
	if inode(t, live) != dirIno || inode(t, filepath.Join(f.wfDir, "wordcount.json")) != wfIno {
		t.Fatal("an unchanged redeploy replaced the Oozie directory or the workflows file")
	}
	if res.Files != 3 || readManifestFile(t, f).HDFS == nil {
		t.Fatalf("result %+v", res)
	}
	if inode(t, manifest) != mIno {
		t.Fatal("an unchanged redeploy by the same user rewrote the manifest")
	}
	// Another deployer: nothing to deploy, but the manifest says who.
	o := f.options()
	o.User = "bob"
	if res, err := Deploy(ctx, o); err != nil || !res.HDFSUnchanged || readManifestFile(t, f).User != "bob" {
		t.Fatalf("redeploy by bob: %+v %v, manifest user %q", res, err, readManifestFile(t, f).User)
	}

	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{"workflow.xml": "<workflow-app name='wordcount-v2'/>\n"})
	res, err = Deploy(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sent{Files: 1, Bytes: 36, WorkflowsUnchanged: true}, sentOf(res)); d != "" {
		t.Fatalf("one file changed (-want +got):\n%s", d)
	}
	if inode(t, live) == dirIno {
		t.Fatal("the Oozie directory was changed in place, not swapped")
	}
	if inode(t, filepath.Join(live, "lib/wc.jar")) != jarIno {
		t.Fatal("lib/wc.jar was copied, not hard-linked")
	}
	if d := cmp.Diff(tree(t, filepath.Join(f.deployDir, "hdfs")), deployed(t, tree(t, live))); d != "" {
		t.Fatalf("Oozie dir (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"wordcount"}, names(t, f.hdfsRoot)); d != "" {
		t.Fatalf("HDFS root (-want +got):\n%s", d)
	}
	if p, err := MakePlan(ctx, f.options()); err != nil || p.HasChanges() {
		t.Fatalf("plan after the incremental deploy: %+v %v", p, err)
	}
}

// TestDeployIncrementalNoticesRemoteChanges: whatever was changed in the
// live Oozie directory behind deploy's back is not kept. Each case changes
// the live directory right after a deploy (within the same second, the
// hardest case for a listing) and redeploys the unchanged project, which
// must put the project's tree back.
func TestDeployIncrementalNoticesRemoteChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, f *fixture, live string)
		sent   int // files sent by the redeploy
	}{
		{"file rewritten, same size", func(t *testing.T, f *fixture, live string) {
			writeFiles(t, live, map[string]string{"lib/wc.jar": strings.Repeat("JAR", 1000)})
		}, 1},
		{"file rewritten, time set back to another second", func(t *testing.T, f *fixture, live string) {
			writeFiles(t, live, map[string]string{"lib/deps/x.jar": "y"})
			if err := os.Chtimes(filepath.Join(live, "lib/deps/x.jar"), time.Unix(1e9, 0), time.Unix(1e9, 0)); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"file removed", func(t *testing.T, f *fixture, live string) {
			if err := os.Remove(filepath.Join(live, "workflow.xml")); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"file added", func(t *testing.T, f *fixture, live string) {
			writeFiles(t, live, map[string]string{"lib/evil.jar": "x"})
		}, 0},
		{"directory added", func(t *testing.T, f *fixture, live string) {
			if err := os.Mkdir(filepath.Join(live, "extra"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"symbolic link added", func(t *testing.T, f *fixture, live string) {
			symlink(t, "/etc/passwd", filepath.Join(live, "lib", "passwd"))
		}, 0},
		{"owner record removed", func(t *testing.T, f *fixture, live string) {
			if err := os.Remove(filepath.Join(live, OwnerFile)); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"manifest of an older celos (times as uploaded)", func(t *testing.T, f *fixture, live string) {
			m := readManifestFile(t, f)
			for i := range m.HDFS.Files {
				m.HDFS.Files[i].ModTime = m.DeployedAt
			}
			data, _ := json.Marshal(m)
			writeFiles(t, filepath.Join(f.wfDir, StateDir), map[string]string{"wordcount.manifest.json": string(data)})
		}, 3},
		{"manifest checksum garbled", func(t *testing.T, f *fixture, live string) {
			m := readManifestFile(t, f)
			m.HDFS.Files[0].SHA256 = "not a checksum"
			data, _ := json.Marshal(m)
			writeFiles(t, filepath.Join(f.wfDir, StateDir), map[string]string{"wordcount.manifest.json": string(data)})
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := Deploy(ctx, f.options()); err != nil {
				t.Fatal(err)
			}
			live := filepath.Join(f.hdfsRoot, "wordcount")
			tc.change(t, f, live)
			res, err := Deploy(ctx, f.options())
			if err != nil {
				t.Fatal(err)
			}
			if res.HDFSUnchanged || res.FilesSent != tc.sent {
				t.Errorf("redeploy: %+v, want %d file(s) sent and a swap", sentOf(res), tc.sent)
			}
			if d := cmp.Diff(tree(t, filepath.Join(f.deployDir, "hdfs")), deployed(t, tree(t, live))); d != "" {
				t.Fatalf("Oozie dir after the redeploy (-want +got):\n%s", d)
			}
			if _, err := os.Lstat(filepath.Join(live, "lib", "passwd")); err == nil {
				t.Fatal("the symbolic link was kept")
			}
			if _, err := os.Stat(filepath.Join(live, "extra")); err == nil {
				t.Fatal("the extra directory was kept")
			}
			res, err = Deploy(ctx, f.options())
			if err != nil || !res.HDFSUnchanged {
				t.Fatalf("a second redeploy: %+v, %v; want it unchanged", res, err)
			}
		})
	}
}

// TestDeployWorkflowsFileChangedRemotely: a workflows file edited on the
// server is rewritten even though the project did not change.
func TestDeployWorkflowsFileChangedRemotely(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(f.wfDir, "wordcount.json")
	writeFiles(t, f.wfDir, map[string]string{"wordcount.json": strings.Replace(marshal(t, f.project), "lax", "LAX", 1)})
	res, err := Deploy(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if res.WorkflowsUnchanged || !res.HDFSUnchanged {
		t.Fatalf("result %+v", sentOf(res))
	}
	data, err := os.ReadFile(wf)
	if err != nil || string(data) != marshal(t, f.project) {
		t.Fatalf("workflows file not restored: %v", err)
	}
}

func TestUploadStamp(t *testing.T) {
	start := time.Date(2026, 11, 24, 10, 0, 0, 500, time.UTC)
	for _, tc := range []struct{ local, want time.Time }{
		{time.Time{}, start.Add(-stampAge).Truncate(time.Second)},
		{start.Add(-time.Second), start.Add(-stampAge).Truncate(time.Second)},
		{start.Add(time.Hour), start.Add(-stampAge).Truncate(time.Second)},
		{start.Add(-2*time.Hour + 300*time.Millisecond), start.Add(-2 * time.Hour).Truncate(time.Second)},
	} {
		got := uploadStamp(tc.local, start)
		if !got.Equal(tc.want) {
			t.Errorf("uploadStamp(%v) = %v, want %v", tc.local, got, tc.want)
		}
		if !got.Before(start.Add(-racyMargin)) {
			t.Errorf("uploadStamp(%v) = %v is racy", tc.local, got)
		}
	}
}

// TestDeployIncrementalHashCache: with a cache directory, an unchanged
// project is compared without reading its files (their checksums are
// kept by identity), and a local file rewritten with the same size and
// its modification time set back is still seen as changed (its change
// time moved).
func TestDeployIncrementalHashCache(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	o := f.options()
	o.CacheDir = t.TempDir()
	jar := filepath.Join(f.deployDir, "hdfs", "lib", "wc.jar")
	before, err := os.Stat(jar)
	if err != nil {
		t.Fatal(err)
	}
	// Files changed in the last 2 s are not recorded (internal/cache):
	// let the project's files age past that.
	for time.Since(before.ModTime()) < 3*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if res, err := Deploy(ctx, o); err != nil || !res.HDFSUnchanged {
		t.Fatalf("second deploy: %+v %v", res, err)
	}
	recorded, err := filepath.Glob(filepath.Join(o.CacheDir, "filehashes", "*", "*"))
	if err != nil || len(recorded) != 1 {
		t.Fatalf("recorded checksums: %v %v", recorded, err)
	}
	if err := os.WriteFile(jar, []byte(strings.Repeat("JAR", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(jar, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	res, err := Deploy(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.HDFSUnchanged || res.FilesSent != 1 {
		t.Fatalf("after the rewrite: %+v", sentOf(res))
	}
	if d := cmp.Diff(tree(t, filepath.Join(f.deployDir, "hdfs")), deployed(t, tree(t, filepath.Join(f.hdfsRoot, "wordcount")))); d != "" {
		t.Fatalf("Oozie dir (-want +got):\n%s", d)
	}
}

// TestDeployHashCachePruned: the checksums a deploy keeps are those of
// the project's files: a file removed from the project is dropped from
// the cache at the next deploy (the entry used to keep every file the
// project ever had).
func TestDeployHashCachePruned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	o := f.options()
	o.CacheDir = t.TempDir()
	hdfs := filepath.Join(f.deployDir, "hdfs")
	before, err := os.Stat(filepath.Join(hdfs, "lib", "wc.jar"))
	if err != nil {
		t.Fatal(err)
	}
	for time.Since(before.ModTime()) < 3*time.Second { // see TestDeployIncrementalHashCache
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if _, err := Deploy(ctx, o); err != nil { // hashes and records every file
		t.Fatal(err)
	}
	recorded := func() []string {
		t.Helper()
		abs, err := filepath.Abs(hdfs)
		if err != nil {
			t.Fatal(err)
		}
		key := sha256.Sum256([]byte(abs))
		data, ok := cache.Open(o.CacheDir).Get("filehashes", hex.EncodeToString(key[:]))
		if !ok {
			t.Fatal("no recorded checksums")
		}
		var doc struct{ Files map[string]json.RawMessage }
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		var names []string
		for name := range doc.Files {
			names = append(names, name)
		}
		sort.Strings(names)
		return names
	}
	if d := cmp.Diff([]string{"lib/deps/x.jar", "lib/wc.jar", "workflow.xml"}, recorded()); d != "" {
		t.Fatalf("recorded (-want +got):\n%s", d)
	}
	if err := os.Remove(filepath.Join(hdfs, "lib", "deps", "x.jar")); err != nil {
		t.Fatal(err)
	}
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"lib/wc.jar", "workflow.xml"}, recorded()); d != "" {
		t.Fatalf("recorded after x.jar was removed (-want +got):\n%s", d)
	}
}

// noLinkFS is a file system whose server turns out not to make hard
// links (an SFTP server without hardlink@openssh.com).
type noLinkFS struct {
	targets.FS
	links atomic.Int64
}

func (n *noLinkFS) Link(oldname, newname string) error {
	n.links.Add(1)
	return fmt.Errorf("link %s: %w", newname, errors.ErrUnsupported)
}

func (n *noLinkFS) SetModTime(name string, mtime time.Time) error {
	return n.FS.(targets.TimeSetter).SetModTime(name, mtime)
}

// TestDeployIncrementalWithoutHardLinks: when the server cannot link, the
// unchanged files are uploaded instead (after the first refusal, no more
// links are tried), and the deployment is the project's.
func TestDeployIncrementalWithoutHardLinks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(f.deployDir, "hdfs"), map[string]string{"workflow.xml": "<workflow-app name='wordcount-v2'/>\n"})
	nl := &noLinkFS{}
	f.conn.Close()
	f.conn = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{})
	f.conn.Wrap = func(fsys targets.FS) targets.FS { nl.FS = fsys; return nl }
	res, err := Deploy(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesSent != 3 || res.HDFSUnchanged {
		t.Fatalf("result %+v, want all 3 files sent", sentOf(res))
	}
	if n := nl.links.Load(); n < 1 || n > 2 {
		t.Errorf("%d links tried, want 1 (2 at most: two files in flight at once)", n)
	}
	if d := cmp.Diff(tree(t, filepath.Join(f.deployDir, "hdfs")), deployed(t, tree(t, filepath.Join(f.hdfsRoot, "wordcount")))); d != "" {
		t.Fatalf("Oozie dir (-want +got):\n%s", d)
	}
}

// TestSameButTime: an unchanged deploy skips writing its manifest only
// when the new one differs from the previous one in DeployedAt alone.
func TestSameButTime(t *testing.T) {
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	base := func() *Manifest {
		return &Manifest{Format: ManifestFormat, Project: "p", DeployedAt: at, GitCommit: "abc", Workflows: []string{"a"},
			HDFS: &HDFSManifest{FS: "file:///", Dir: "/h/p", Bytes: 3, Files: []ManifestFile{
				{Path: "a", Size: 1, SHA256: "s1", ModTime: at.Add(-time.Hour)},
				{Path: "b", Size: 2, SHA256: "s2", ModTime: at.Add(-time.Hour)},
			}}}
	}
	for _, tc := range []struct {
		name   string
		change func(m *Manifest)
		same   bool
	}{
		{"identical", func(*Manifest) {}, true},
		{"deployed later", func(m *Manifest) { m.DeployedAt = at.Add(time.Hour) }, true},
		{"same time, other zone", func(m *Manifest) { m.HDFS.Files[1].ModTime = m.HDFS.Files[1].ModTime.In(time.FixedZone("x", 3600)) }, true},
		{"another commit", func(m *Manifest) { m.GitCommit = "def" }, false},
		{"another workflow", func(m *Manifest) { m.Workflows = []string{"b"} }, false},
		{"a file's time", func(m *Manifest) { m.HDFS.Files[1].ModTime = at }, false},
		{"a file's checksum", func(m *Manifest) { m.HDFS.Files[0].SHA256 = "s9" }, false},
		{"a file's size", func(m *Manifest) { m.HDFS.Files[0].Size = 5 }, false},
		{"a file less", func(m *Manifest) { m.HDFS.Files = m.HDFS.Files[:1] }, false},
		{"another directory", func(m *Manifest) { m.HDFS.Dir = "/h/q" }, false},
		{"no Oozie directory", func(m *Manifest) { m.HDFS = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.change(b)
			if got := sameButTime(a, b); got != tc.same {
				t.Fatalf("sameButTime = %v, want %v", got, tc.same)
			}
			if got := sameButTime(b, a); got != tc.same {
				t.Fatalf("sameButTime (swapped) = %v, want %v", got, tc.same)
			}
			if base().HDFS.Files == nil || a.HDFS.Files == nil {
				t.Fatal("sameButTime changed its arguments")
			}
		})
	}
}
