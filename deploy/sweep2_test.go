package deploy

// The second adversarial sweep of the deploy path (November 2026):
// incremental deploys, the lock, plan and undeploy against hostile or
// hand-modified targets. See docs/reliability.md, "Deploy sweep, round
// two".

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// TestOverlapThroughServerSymlinkOpenSSH: on the real OpenSSH server, the
// workflows directory is reached through a symbolic link (a home
// directory /home/celos that links to /srv/celos), and the HDFS side is
// the server's disk (fs.defaultFS file:///) with the HDFS root the real
// directory. A project named workflows has HDFS_ROOT/NAME = the workflows
// directory's real path: deploy swapped it aside and removed it with
// every project's workflows file, and undeploy removed it. Both must be
// refused, as on the local disk, with nothing changed.
func TestOverlapThroughServerSymlinkOpenSSH(t *testing.T) {
	for _, tc := range []struct {
		name, project string
		viaLink       bool // the HDFS root named through the link, the workflows directory not
	}{
		{"workflows dir through the link", "workflows", false},
		{"HDFS root through the link, not yet deployed", "wordcount", true},
	} {
		for _, cmd := range []string{"deploy", "plan", "undeploy"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				srv := sshtest.Start(t, sshtest.Options{})
				real := filepath.Join(srv.Root, "srv")
				home := filepath.Join(srv.Root, "home")
				if err := os.MkdirAll(real, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(real, home); err != nil {
					t.Fatal(err)
				}
				// The installation as the target file names it.
				base, hdfsRoot := home, filepath.Join(real, "celos")
				if tc.viaLink {
					base, hdfsRoot = real, filepath.Join(home, "celos", "workflows")
				}
				r := newRemoteIn(t, srv, base, localCore, hdfsRoot)
				writeFiles(t, filepath.Join(real, "celos", "workflows"), map[string]string{"other.json": `{"project":"other","workflows":[]}`})
				before := tree(t, real)
				o := r.options(t)
				o.Project = tc.project
				r.project = project(tc.project, tc.project+"-x")
				err := runCommand(context.Background(), cmd, o)
				if !errors.Is(err, ErrHDFSDirOverlaps) {
					t.Errorf("%s: want ErrHDFSDirOverlaps, got %v", cmd, err)
				}
				if diff := cmp.Diff(before, tree(t, real)); diff != "" {
					t.Fatalf("%s changed the installation (-before +after):\n%s", cmd, diff)
				}
			})
		}
	}
}

// hookFS calls before(op, name) ahead of Remove and Rename (from), and
// keeps the hard links of the file system it wraps.
type hookFS struct {
	targets.FS
	before func(op, name string)
}

func (h *hookFS) Remove(name string) error {
	h.before("remove", name)
	return h.FS.Remove(name)
}

func (h *hookFS) Rename(from, to string) error {
	h.before("rename", from)
	return h.FS.Rename(from, to)
}

func (h *hookFS) Link(oldname, newname string) error {
	l, ok := h.FS.(targets.Linker)
	if !ok {
		return errors.ErrUnsupported
	}
	return l.Link(oldname, newname)
}

// lockSession opens a session of the project wordcount on r's target,
// its workflows directory wrapped by wrap (if not nil).
func lockSession(t *testing.T, r *remote, breakLock bool, wrap func(targets.FS) targets.FS) *session {
	t.Helper()
	o := r.options(t)
	o.Project = "wordcount"
	o.BreakLock = breakLock
	o.Connector.Wrap = wrap
	s, err := openSession(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// heldLockID is the id in the project's lock file on r ("" if none).
func heldLockID(t *testing.T, r *remote) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.wfDir, StateDir, "wordcount.lock"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var l lockInfo
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	return l.ID
}

// TestStaleLockTakenOverOnce: a lock left by a dead process of this
// machine (a deploy killed with kill -9), and two deploys of the project
// started again at once, which both find it stale. The first removes it
// and takes the lock; the second, which read the stale lock before,
// removed the first one's new lock and took the lock too: two deploys
// held it at once. Now exactly one holds it, the other is told who.
// On the real OpenSSH server; the second deploy is held between reading
// the stale lock and removing it until the first has the lock.
func TestStaleLockTakenOverOnce(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(lockInfo{ID: "stale", Project: "wordcount", User: "ci", Host: host, PID: dead.Process.Pid, Since: time.Now().Add(-time.Minute)})
	writeFiles(t, filepath.Join(r.wfDir, StateDir), map[string]string{"wordcount.lock": string(stale)})

	lockFile := path.Join(filepath.ToSlash(r.wfDir), StateDir, "wordcount.lock")
	bRead, aHolds := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := lockSession(t, r, false, func(fsys targets.FS) targets.FS {
		return &hookFS{FS: fsys, before: func(op, name string) {
			if name == lockFile {
				once.Do(func() { close(bRead); <-aHolds })
			}
		}}
	})
	a := lockSession(t, r, false, nil)

	type got struct {
		lk  *lock
		err error
	}
	bDone := make(chan got, 1)
	go func() {
		lk, err := b.acquireLock(context.Background(), "deploy")
		bDone <- got{lk, err}
	}()
	<-bRead // B has read the stale lock and is about to remove it; A takes it now.
	lkA, err := a.acquireLock(context.Background(), "deploy")
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	close(aHolds)
	gb := <-bDone
	if gb.err == nil {
		t.Errorf("B took the lock too while A held it (lock file now %q, A's %q)", heldLockID(t, r), lkA.id)
		gb.lk.release()
	} else if le := (*LockedError)(nil); !errors.As(gb.err, &le) {
		t.Errorf("B: want LockedError, got %v", gb.err)
	}
	if id := heldLockID(t, r); id != lkA.id {
		t.Errorf("the lock file holds %q, not A's %q", id, lkA.id)
	}
	lkA.release()
}

// TestLockReleaseKeepsABreakersLock: deploy A holds the lock; B takes it
// over with --break-lock (A looked hung); when A ends, its release
// removed B's lock, so a third deploy C ran beside B. Now A leaves a lock
// that is no longer its own, with a warning, and C is refused.
func TestLockReleaseKeepsABreakersLock(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	ctx := context.Background()
	var warnings []string
	a := lockSession(t, r, false, nil)
	a.o.Warn = func(s string) { warnings = append(warnings, s) }
	lkA, err := a.acquireLock(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	lkB, err := lockSession(t, r, true, nil).acquireLock(ctx, "deploy")
	if err != nil {
		t.Fatalf("B with --break-lock: %v", err)
	}
	lkA.release()
	if id := heldLockID(t, r); id != lkB.id {
		t.Errorf("after A's release the lock file holds %q, not B's %q", id, lkB.id)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "taken over") {
		t.Errorf("A's warnings %q, want one saying its lock was taken over", warnings)
	}
	if lkC, err := lockSession(t, r, false, nil).acquireLock(ctx, "deploy"); err == nil {
		lkC.release()
		t.Errorf("C took the lock while B held it")
	}
	lkB.release()
	if id := heldLockID(t, r); id != "" {
		t.Errorf("B's release left the lock %q", id)
	}
}

// TestPlanQuotesHostileRemoteNames: files put into the live Oozie
// directory on the target by hand or by another tool (a shared HDFS root
// others can write) have any names; plan printed the removed ones as
// they were, so a newline forged lines of the plan reviewers read in CI
// and an escape sequence restyled the terminal or CI log. They are shown
// quoted now, as the local names that hdfs/ refuses would be.
func TestPlanQuotesHostileRemoteNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(f.hdfsRoot, "wordcount")
	writeFiles(t, live, map[string]string{
		"x\n  + lib/forged.jar (1 B)": "x",
		"\x1b]0;pwned\x07title":       "x",
		"lib/\u202egpj.exe":           "x",
	})
	p, err := MakePlan(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	p.WriteText(&b)
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "+ lib/forged.jar (1 B)" {
			t.Errorf("a remote file name forged a line of the plan:\n%s", out)
		}
	}
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("the plan carries an escape sequence or a bidi control of a remote name: %q", out)
	}
	for _, want := range []string{`"x\n  + lib/forged.jar (1 B)"`, `"\x1b]0;pwned\atitle"`, `"lib/\u202egpj.exe"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not show %s quoted:\n%s", want, out)
		}
	}
}

// TestHostileOwnerRecordNotEchoed: an owner record claiming the Oozie
// directory for another workflows directory, whose claim holds a newline
// and an escape sequence, is refused; the error quotes the claim rather
// than printing it raw into the terminal or CI log.
func TestHostileOwnerRecordNotEchoed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(ownerRecord{Format: OwnerFormat, Project: "wordcount", WorkflowsDir: "sftp://evil/wf\nThe previous deployment is intact.\x1b[2J"})
	writeFiles(t, filepath.Join(f.hdfsRoot, "wordcount"), map[string]string{OwnerFile: string(rec)})
	for _, cmd := range []string{"deploy", "plan", "undeploy"} {
		o := f.options()
		o.Project = "wordcount"
		err := runCommand(ctx, cmd, o)
		if !errors.Is(err, ErrOwnedElsewhere) {
			t.Fatalf("%s: want ErrOwnedElsewhere, got %v", cmd, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\x1b") || strings.Contains(msg, "\nThe previous deployment is intact.\x1b") {
			t.Errorf("%s: the owner record's claim is printed raw: %q", cmd, msg)
		}
	}
}

// freezingSFTP freezes the SFTP sessions of srv once the upload has sent
// 1 MiB of a big file.
type freezingSFTP struct {
	targets.FS
	once   *sync.Once
	freeze func()
}

func (f *freezingSFTP) WriteNew(ctx context.Context, name string, r io.Reader, size int64, durable bool) error {
	if size > 4<<20 {
		r = &killAfter{r: r, n: 1 << 20, once: f.once, kill: f.freeze}
	}
	return f.FS.WriteNew(ctx, name, r, size, durable)
}

// TestDeploySFTPSessionsStalled: in the middle of a redeploy's upload the
// real OpenSSH server's SFTP session processes stop answering (SIGSTOP: an
// sftp-server stuck on a hung mount), while the SSH connection itself
// answers keep-alives. The deploy hung for ever. It must fail within its
// SFTP deadline, naming the operation, with the previous deployment
// intact, and a rerun succeed once the server answers again.
func TestDeploySFTPSessionsStalled(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	ctx := context.Background()
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	beforeWF := tree(t, filepath.Join(srv.Root, "celos"))["workflows/wordcount.json"]
	beforeHDFS := tree(t, filepath.Join(srv.Root, "hdfs", "wordcount"))

	r.project = project("wordcount", "wordcount-v2")
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{"lib/big.jar": strings.Repeat("0123456789abcdef", 1<<20)})
	o := r.options(t)
	o.Connector.SFTPTimeout = 3 * time.Second
	var once sync.Once
	thaw := func() {}
	t.Cleanup(func() { thaw() })
	o.Connector.Wrap = func(fsys targets.FS) targets.FS {
		return &freezingSFTP{FS: fsys, once: &once, freeze: func() { thaw = srv.FreezeSessions() }}
	}
	type result struct{ err error }
	done := make(chan result, 1)
	start := time.Now()
	go func() { _, err := Deploy(ctx, o); done <- result{err} }()
	var err error
	select {
	case res := <-done:
		err = res.err
	case <-time.After(2 * time.Minute):
		thaw()
		t.Fatalf("the deploy still runs 2 minutes after the SFTP sessions stopped answering")
	}
	t.Logf("stalled: %v (after %s)", err, time.Since(start))
	var se *StepError
	if !errors.As(err, &se) || se.Step != "upload HDFS directory" || !se.Intact {
		t.Fatalf("want an intact failure at the upload, got %v", err)
	}
	if !strings.Contains(err.Error(), "no answer") {
		t.Errorf("the error does not say the server stopped answering: %v", err)
	}
	thaw()
	if got := tree(t, filepath.Join(srv.Root, "celos"))["workflows/wordcount.json"]; got != beforeWF {
		t.Fatalf("workflows file changed")
	}
	if d := cmp.Diff(beforeHDFS, tree(t, filepath.Join(srv.Root, "hdfs", "wordcount"))); d != "" {
		t.Fatalf("Oozie dir changed (-before +after):\n%s", d)
	}
	o = r.options(t)
	o.BreakLock = true // the stalled deploy's lock may not have been removed
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if got := r.workflowsFile(t); got != marshal(t, r.project) {
		t.Fatal("rerun did not deploy the new workflows")
	}
}

// TestDeployNoticesFilesSwappedOnTheServer: every file a deploy uploaded
// had the same modification time (the deploy's start minus a minute), so
// a file copied over another of the same size with its time kept (cp -p,
// hdfs dfs -cp -p) or moved onto it (mv keeps the time) still showed the
// recorded size and time: an unchanged redeploy kept the wrong content,
// and a changed one hard-linked it into the new directory, recording the
// local checksum. Now no two files of a deployment share a time, so the
// listing shows the swap. On the real OpenSSH server (file:///, with
// hardlink@openssh.com).
func TestDeployNoticesFilesSwappedOnTheServer(t *testing.T) {
	for _, how := range []string{"cp -p", "mv"} {
		t.Run(how, func(t *testing.T) {
			srv := sshtest.Start(t, sshtest.Options{})
			r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
			writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{"conf/a.xml": "<a/>\n", "conf/b.xml": "<b/>\n"})
			ctx := context.Background()
			if _, err := Deploy(ctx, r.options(t)); err != nil {
				t.Fatal(err)
			}
			live := filepath.Join(srv.Root, "hdfs", "wordcount")
			a, b := filepath.Join(live, "conf/a.xml"), filepath.Join(live, "conf/b.xml")
			switch how {
			case "cp -p":
				fi, err := os.Stat(a)
				if err != nil {
					t.Fatal(err)
				}
				if err := exec.Command("cp", "-p", a, b).Run(); err != nil {
					t.Fatal(err)
				}
				if got, _ := os.Stat(b); !got.ModTime().Equal(fi.ModTime()) {
					t.Fatalf("cp -p did not keep the time")
				}
			case "mv":
				if err := os.Rename(a, b); err != nil {
					t.Fatal(err)
				}
			}
			p, err := MakePlan(ctx, r.options(t))
			if err != nil {
				t.Fatal(err)
			}
			if !p.HasChanges() {
				t.Errorf("plan sees no change after %s of a.xml onto b.xml", how)
			}
			res, err := Deploy(ctx, r.options(t))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, tree(t, live))); d != "" {
				t.Fatalf("after %s on the server the redeploy left (-want +got):\n%s\nresult %+v", how, d, sentOf(res))
			}
		})
	}
}

// TestDistinctStamps: the files of a deployment never share a time, with
// the trusted live files that may be linked or among themselves (files
// checked out in the same second), and stay whole seconds, not racy.
func TestDistinctStamps(t *testing.T) {
	start := time.Date(2026, 11, 24, 10, 0, 0, 500, time.UTC)
	base := start.Add(-stampAge).Truncate(time.Second)
	checkout := start.Add(-2 * time.Hour)
	tree := &localTree{files: []localFile{{rel: "a", mtime: start}, {rel: "b", mtime: start}, {rel: "c", mtime: checkout}, {rel: "d", mtime: checkout.Add(300 * time.Millisecond)}}}
	st := &liveState{trusted: map[string]ManifestFile{"x": {ModTime: base}, "y": {ModTime: base.Add(-2 * time.Second)}}}
	got := distinctStamps(tree, st, start)
	want := map[string]time.Time{
		"a": base.Add(-time.Second), "b": base.Add(-3 * time.Second),
		"c": checkout.Truncate(time.Second), "d": checkout.Truncate(time.Second).Add(-time.Second),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("stamps (-want +got):\n%s", d)
	}
}

// corruptManifest damages the project's manifest: "truncated" (a crash
// after a write that was not synced, a disk full) or "huge" (65 MiB, over
// what deploy reads).
func corruptManifest(t *testing.T, f *fixture, how string) {
	t.Helper()
	p := filepath.Join(f.wfDir, StateDir, "wordcount.manifest.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "truncated":
		err = os.WriteFile(p, data[:len(data)/2], 0o644)
	case "huge":
		err = os.Truncate(p, 65<<20) // a sparse tail of NULs
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestCorruptManifestTakesNothingOver: a project without hdfs/ is
// deployed (its manifest names no Oozie directory), and HDFS_ROOT/NAME
// was written by another tool (no owner record). With the manifest
// intact, deploy refuses that directory and undeploy leaves it. With the
// manifest truncated, it was read as "no manifest" (a Celos CI
// deployment): deploy took the directory over and removed it, undeploy
// removed it. With the manifest over 64 MiB, deploy and undeploy failed
// at "read manifest" for good. Now an unreadable manifest takes over no
// directory without an owner record, and does not block the project.
func TestCorruptManifestTakesNothingOver(t *testing.T) {
	for _, how := range []string{"truncated", "huge"} {
		for _, cmd := range []string{"deploy", "undeploy"} {
			t.Run(how+"/"+cmd, func(t *testing.T) {
				f := newFixture(t)
				ctx := context.Background()
				hdfsDir := filepath.Join(f.deployDir, "hdfs")
				saved := tree(t, hdfsDir)
				os.RemoveAll(hdfsDir)
				if _, err := Deploy(ctx, f.options()); err != nil {
					t.Fatal(err)
				}
				foreign := filepath.Join(f.hdfsRoot, "wordcount")
				writeFiles(t, foreign, map[string]string{"precious.jar": "another tool's"})
				writeFiles(t, hdfsDir, saved)
				corruptManifest(t, f, how)
				var warnings []string
				o := f.options()
				o.Project = "wordcount"
				o.Warn = func(s string) { warnings = append(warnings, s) }
				var err error
				if cmd == "deploy" {
					_, err = Deploy(ctx, o)
					if !errors.Is(err, ErrOwnedElsewhere) {
						t.Errorf("deploy: want ErrOwnedElsewhere, got %v", err)
					}
				} else if _, err = Undeploy(ctx, o); err != nil {
					t.Errorf("undeploy: %v", err)
				}
				if d := cmp.Diff(map[string]string{"precious.jar": "another tool's"}, tree(t, foreign)); d != "" {
					t.Fatalf("%s with a %s manifest changed %s (-want +got):\n%s\nerror %v, warnings %q", cmd, how, foreign, d, err, warnings)
				}
				if cmd == "undeploy" {
					if _, err := os.Stat(filepath.Join(f.wfDir, "wordcount.json")); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("undeploy left the workflows file: %v", err)
					}
				}
			})
		}
	}
}

// TestHugeManifestDoesNotBlockDeploys: a manifest grown over 64 MiB (by
// hand, or a runaway tool) stopped every deploy of the project at "read
// manifest". It is now read as unreadable, with a warning: the deploy
// proceeds (its own Oozie directory has its owner record) and writes a
// new manifest.
func TestHugeManifestDoesNotBlockDeploys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	corruptManifest(t, f, "huge")
	var warnings []string
	o := f.options()
	o.Warn = func(s string) { warnings = append(warnings, s) }
	if _, err := Deploy(ctx, o); err != nil {
		t.Fatalf("deploy with a huge manifest: %v", err)
	}
	if len(warnings) == 0 || !strings.Contains(strings.Join(warnings, "\n"), "unreadable") {
		t.Errorf("warnings %q, want one about the unreadable manifest", warnings)
	}
	if m := readManifestFile(t, f); m.HDFS == nil || len(m.HDFS.Files) != 3 {
		t.Fatalf("the manifest was not rewritten: %+v", m)
	}
}

// TestDeploymentsListsSymlinkedWorkflowsFiles: the server schedules a
// workflows file that is a symbolic link to a regular file (an
// administrator's NAME.json linking to a versioned copy); celos
// deployments left it out, so the listing of what is deployed missed a
// project the server runs. A broken link, which the server loads nothing
// from, stays out.
func TestDeploymentsListsSymlinkedWorkflowsFiles(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := Deploy(ctx, f.options()); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(f.root, "versions"), map[string]string{"legacy-v3.json": `{"project":"legacy","workflows":[]}`})
	if err := os.Symlink(filepath.Join(f.root, "versions", "legacy-v3.json"), filepath.Join(f.wfDir, "legacy.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.root, "versions", "gone.json"), filepath.Join(f.wfDir, "broken.json")); err != nil {
		t.Fatal(err)
	}
	_, ds, err := Deployments(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Project)
	}
	if d := cmp.Diff([]string{"legacy", "wordcount"}, got); d != "" {
		t.Fatalf("projects listed (-want +got):\n%s", d)
	}
}

// TestDeployNoticesFilesCopiedOnHDFS: the same on the real HDFS mini
// cluster: hdfs dfs -cp -p -f of a file of the deployment onto another
// of the same size keeps its modification time; the unchanged redeploy
// must not keep the wrong content. (A file moved onto another, hdfs dfs
// -mv, leaves one missing: HDFS then uploads the whole tree.)
func TestDeployNoticesFilesCopiedOnHDFS(t *testing.T) {
	r, cl, root := newHDFSRemote(t)
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{"conf/a.xml": "<a/>\n", "conf/b.xml": "<b/>\n"})
	ctx := context.Background()
	c := cl.Client()
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	live := root + "/wordcount"
	a, err := c.Stat(live + "/conf/a.xml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(live + "/conf/b.xml"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Create(live + "/conf/b.xml") // a's content: hdfs dfs -cp -p -f
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, "<a/>\n"); err != nil {
		t.Fatal(err)
	}
	for err := w.Close(); err != nil; err = w.Close() {
		if !hdfs.IsErrReplicating(err) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the NameNode has not seen the replica yet
	}
	if err := c.Chtimes(live+"/conf/b.xml", a.ModTime(), a.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tree(t, filepath.Join(r.deployDir, "hdfs")), deployed(t, hdfsTree(t, c, live))); d != "" {
		t.Fatalf("after hdfs dfs -cp -p the redeploy left (-want +got):\n%s", d)
	}
}

// swapOnListFS calls swap once, when the live Oozie directory is first
// listed (after the project's hdfs/ was scanned, before plan reads the
// changed files for their diff).
type swapOnListFS struct {
	targets.FS
	once *sync.Once
	swap func()
}

func (s *swapOnListFS) ReadDir(name string) ([]fs.FileInfo, error) {
	if strings.HasSuffix(name, "/wordcount") {
		s.once.Do(s.swap)
	}
	return s.FS.ReadDir(name)
}

// TestPlanDiffOpensLocalFilesSafely: plan read a changed local file for
// its diff with a plain open, unlike every other read of hdfs/
// (O_NOFOLLOW|O_NONBLOCK, regular files only): a file replaced after the
// scan by a symbolic link out of the project had the linked file's
// content printed in the plan, and one replaced by a FIFO hung the plan.
// Both are refused now.
func TestPlanDiffOpensLocalFilesSafely(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := Deploy(ctx, f.options()); err != nil {
				t.Fatal(err)
			}
			local := filepath.Join(f.deployDir, "hdfs", "workflow.xml")
			writeFiles(t, f.deployDir, map[string]string{"hdfs/workflow.xml": "<workflow-app name='changed, longer'/>\n"})
			secret := filepath.Join(f.root, "secret.txt")
			writeFiles(t, f.root, map[string]string{"secret.txt": "password=hunter2\n"})
			o := f.options()
			o.Connector = targets.NewConnector(targets.SSHOptions{}, hadoopconf.Options{})
			t.Cleanup(func() { o.Connector.Close() })
			var once sync.Once
			o.Connector.Wrap = func(fsys targets.FS) targets.FS {
				return &swapOnListFS{FS: fsys, once: &once, swap: func() {
					os.Remove(local)
					var err error
					if kind == "symlink" {
						err = os.Symlink(secret, local)
					} else {
						err = syscall.Mkfifo(local, 0o644)
					}
					if err != nil {
						t.Error(err)
					}
				}}
			}
			type result struct {
				p   *Plan
				err error
			}
			done := make(chan result, 1)
			go func() { p, err := MakePlan(ctx, o); done <- result{p, err} }()
			var res result
			select {
			case res = <-done:
			case <-time.After(30 * time.Second):
				if w, err := os.OpenFile(local, os.O_WRONLY, 0); err == nil {
					w.Close() // let the blocked open return
				}
				t.Fatal("plan hung on a FIFO put in place of a changed file")
			}
			if res.err == nil {
				var b strings.Builder
				res.p.WriteTextDiff(&b, -1)
				if strings.Contains(b.String(), "hunter2") {
					t.Fatalf("plan printed the content of a file outside the project:\n%s", b.String())
				}
				t.Fatalf("plan accepted a %s in place of a changed file:\n%s\n%+v", kind, b.String(), res.p)
			}
			if !errors.Is(res.err, ErrUnsafeLocalFile) || strings.Contains(res.err.Error(), "hunter2") {
				t.Errorf("want ErrUnsafeLocalFile without the content, got %v", res.err)
			}
		})
	}
}

// TestPlanSeesWhatDeployWouldRemove: an empty directory, a symbolic link
// or a FIFO put into the live Oozie directory makes the next deploy
// rebuild it without them, but plan said "No changes" (it compared
// regular files only). Plan now lists them as removed, and says what
// they are. On the real OpenSSH server (file:///).
func TestPlanSeesWhatDeployWouldRemove(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(live string) error
	}{
		{"empty directory", "  - tmp/ (directory)", func(live string) error { return os.Mkdir(filepath.Join(live, "tmp"), 0o755) }},
		{"symbolic link", "  - lib/current.jar (symbolic link)", func(live string) error {
			return os.Symlink("wc.jar", filepath.Join(live, "lib", "current.jar"))
		}},
		{"fifo", "  - pipe (named pipe)", func(live string) error { return syscall.Mkfifo(filepath.Join(live, "pipe"), 0o644) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sshtest.Start(t, sshtest.Options{})
			r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
			ctx := context.Background()
			if _, err := Deploy(ctx, r.options(t)); err != nil {
				t.Fatal(err)
			}
			live := filepath.Join(srv.Root, "hdfs", "wordcount")
			if err := tc.make(live); err != nil {
				t.Fatal(err)
			}
			p, err := MakePlan(ctx, r.options(t))
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			p.WriteText(&b)
			if !p.HasChanges() || !strings.Contains(b.String(), tc.want+"\n") {
				t.Fatalf("plan, want a line %q:\n%s", tc.want, b.String())
			}
			res, err := Deploy(ctx, r.options(t))
			if err != nil || res.HDFSUnchanged {
				t.Fatalf("deploy: %+v %v", res, err)
			}
			if p, err := MakePlan(ctx, r.options(t)); err != nil || p.HasChanges() {
				t.Fatalf("plan after the deploy: %+v %v", p, err)
			}
		})
	}
}

// TestHDFSRootOfOthersNotTakenOver: a project named like the last
// component of the HDFS root (app) deployed or undeployed with
// --hdfs-root one level too high (/user/celos for /user/celos/app) has
// HDFS_ROOT/NAME = the real HDFS root, holding every other project's
// Oozie directory. It has no owner record and the project no manifest,
// so it was taken over as a Celos CI deployment: deploy swapped it aside
// and removed it, undeploy removed it. A directory that holds another
// deployment's Oozie directory (an owner record one or two levels down)
// is never taken over now. On the real HDFS mini cluster.
func TestHDFSRootOfOthersNotTakenOver(t *testing.T) {
	for _, cmd := range []string{"deploy", "plan", "undeploy"} {
		t.Run(cmd, func(t *testing.T) {
			r, cl, root := newHDFSRemote(t) // root is /<test>/app
			ctx := context.Background()
			c := cl.Client()
			if _, err := Deploy(ctx, r.options(t)); err != nil {
				t.Fatal(err)
			}
			before := hdfsTree(t, c, root)
			o := r.options(t)
			o.Project = "app"
			o.HDFSRoot = path.Dir(root)
			r.project = project("app", "app-x")
			err := runCommand(ctx, cmd, o)
			if !errors.Is(err, ErrOwnedElsewhere) {
				t.Errorf("%s: want ErrOwnedElsewhere, got %v", cmd, err)
			}
			if d := cmp.Diff(before, hdfsTree(t, c, root)); d != "" {
				t.Fatalf("%s with the HDFS root one level up changed the real HDFS root (-before +after):\n%s", cmd, d)
			}
		})
	}
}

// TestHostileLockOwnerQuoted: a lock file whose owner fields hold a
// newline and an escape sequence (written by hand, or by a hostile user
// of the target) is named quoted in the "locked" error.
func TestHostileLockOwnerQuoted(t *testing.T) {
	f := newFixture(t)
	other, _ := json.Marshal(lockInfo{ID: "x", Project: "wordcount", User: "eve\nThe previous deployment is intact.", Host: "h\x1b[2J", PID: 1, Since: time.Now(), Command: "deploy\x1b]0;t\x07"})
	writeFiles(t, filepath.Join(f.wfDir, StateDir), map[string]string{"wordcount.lock": string(other)})
	_, err := Deploy(context.Background(), f.options())
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("want LockedError, got %v", err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\x1b\x07") || strings.Contains(msg, "\nThe previous deployment is intact.") {
		t.Errorf("the lock's owner is printed raw: %q", msg)
	}
	if !strings.Contains(err.Error(), `"eve\nThe previous deployment is intact."@"h\x1b[2J"`) {
		t.Errorf("the owner is not shown quoted: %q", err.Error())
	}
}

// swapOnOpenFS calls swap once, before the first file of the live Oozie
// directory named name is opened for reading.
type swapOnOpenFS struct {
	targets.FS
	name string
	once *sync.Once
	swap func()
}

func (s *swapOnOpenFS) Open(name string) (io.ReadCloser, error) {
	if strings.HasSuffix(name, "/wordcount/"+s.name) {
		s.once.Do(s.swap)
	}
	return s.FS.Open(name)
}

// TestPlanReadsOnlyTheListedRemoteFile: a file of the live Oozie
// directory on the server (file:/// over SFTP) replaced by a symbolic
// link to another file of the server after plan listed it, before plan
// read it for its diff or its checksum: SFTP's open follows the link, and
// the plan printed the other file. A file whose opened handle is not the
// one listed (size and time) is refused now. On the real OpenSSH server.
func TestPlanReadsOnlyTheListedRemoteFile(t *testing.T) {
	for _, tc := range []struct{ name, local string }{
		{"diff", "<workflow-app name='a longer one, changed'/>\n"},
		{"checksum", "<workflow-app name='WORDCOUNT'/>\n"}, // same size: read back unless trusted
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sshtest.Start(t, sshtest.Options{})
			r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
			ctx := context.Background()
			if _, err := Deploy(ctx, r.options(t)); err != nil {
				t.Fatal(err)
			}
			live := filepath.Join(srv.Root, "hdfs", "wordcount")
			secret := filepath.Join(srv.Root, "secret.txt")
			writeFiles(t, srv.Root, map[string]string{"secret.txt": "password=hunter2 and more of the same size\n"[:33]})
			if tc.name == "checksum" {
				os.Remove(filepath.Join(r.wfDir, StateDir, "wordcount.manifest.json")) // nothing trusted: read back
			}
			writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{"workflow.xml": tc.local})
			o := r.options(t)
			var once sync.Once
			o.Connector.Wrap = func(fsys targets.FS) targets.FS {
				return &swapOnOpenFS{FS: fsys, name: "workflow.xml", once: &once, swap: func() {
					p := filepath.Join(live, "workflow.xml")
					if err := os.Remove(p); err != nil {
						t.Error(err)
					}
					if err := os.Symlink(secret, p); err != nil {
						t.Error(err)
					}
				}}
			}
			p, err := MakePlan(ctx, o)
			if err == nil {
				var b strings.Builder
				p.WriteTextDiff(&b, -1)
				if strings.Contains(b.String(), "hunter2") {
					t.Fatalf("plan printed a file the live directory only linked to:\n%s", b.String())
				}
				t.Fatalf("plan read through a link put in place of a listed file:\n%s", b.String())
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the linked file: %v", err)
			}
		})
	}
}
