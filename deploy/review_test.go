package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/sshtest"
	"github.com/celos-go/celos/targets"
)

// TestContainedDeploymentNameQuoted: an Oozie directory without an owner
// record that holds another deployment's (an HDFS root named one level
// too high) is refused naming the Oozie directory found inside it. Its
// name is read from the target: a subdirectory named with a newline and
// an escape sequence forged a line of the refusal and restyled the
// terminal, as the names quoted everywhere else did before.
func TestContainedDeploymentNameQuoted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rec, _ := json.Marshal(ownerRecord{Format: OwnerFormat, Project: "other", WorkflowsDir: "sftp://host/wf"})
	hostile := "x\nThe previous deployment is intact.\x1b[2J"
	writeFiles(t, filepath.Join(f.hdfsRoot, "wordcount", hostile), map[string]string{OwnerFile: string(rec)})
	for _, cmd := range []string{"deploy", "plan", "undeploy"} {
		o := f.options()
		o.Project = "wordcount"
		err := runCommand(ctx, cmd, o)
		if !errors.Is(err, ErrOwnedElsewhere) {
			t.Fatalf("%s: want ErrOwnedElsewhere, got %v", cmd, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\x1b") || strings.Contains(msg, "\nThe previous deployment is intact.") {
			t.Errorf("%s: the name of the directory found is printed raw: %q", cmd, msg)
		}
	}
}

// TestPlanRefusalQuotesTheFileName: a file of the live Oozie directory
// replaced by a symbolic link between plan's listing and its read is
// refused, naming the file. A name with a format character (a bidi
// override, which a local file name may hold and the plan quotes) was
// printed raw in that refusal, reordering what the reader sees. On the
// real OpenSSH server.
func TestPlanRefusalQuotesTheFileName(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	ctx := context.Background()
	name := "lib/a\u202egnp.xml"
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{name: "<x/>\n"})
	if _, err := Deploy(ctx, r.options(t)); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(srv.Root, "hdfs", "wordcount")
	writeFiles(t, srv.Root, map[string]string{"other.txt": "something else\n"})
	writeFiles(t, filepath.Join(r.deployDir, "hdfs"), map[string]string{name: "<x changed='yes'/>\n"})
	o := r.options(t)
	var once sync.Once
	o.Connector.Wrap = func(fsys targets.FS) targets.FS {
		return &swapOnOpenFS{FS: fsys, name: name, once: &once, swap: func() {
			p := filepath.Join(live, filepath.FromSlash(name))
			if err := os.Remove(p); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(filepath.Join(srv.Root, "other.txt"), p); err != nil {
				t.Error(err)
			}
		}}
	}
	_, err := MakePlan(ctx, o)
	if err == nil {
		t.Fatal("plan read through a link put in place of a listed file")
	}
	if msg := err.Error(); strings.Contains(msg, "\u202e") {
		t.Errorf("the file name is printed raw: %q", msg)
	}
}

// pauseRenameFS runs hook after each rename of a name on the wrapped file
// system, and passes hard links through.
type pauseRenameFS struct {
	targets.FS
	after func(from, to string)
}

func (p *pauseRenameFS) Rename(from, to string) error {
	err := p.FS.Rename(from, to)
	p.after(from, to)
	return err
}

func (p *pauseRenameFS) Link(oldname, newname string) error {
	l, ok := p.FS.(targets.Linker)
	if !ok {
		return errors.ErrUnsupported
	}
	return l.Link(oldname, newname)
}

// TestStaleLockTakenOverByThree: a stale lock (a deploy killed with
// kill -9) and three deploys started again at once. B reads the stale
// lock; A removes it and takes the lock; B moves A's lock aside to
// compare it with the one it read; before B puts it back, C finds no lock
// and takes it. A and C both held the lock (B failed, saying so). Now C
// sees the lock moved aside and leaves the lock to A; A's release leaves
// nothing behind. On the real OpenSSH server.
func TestStaleLockTakenOverByThree(t *testing.T) {
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

	bRead, aHolds, bMoved, cTried := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	var readOnce, movedOnce sync.Once
	b := lockSession(t, r, false, func(fsys targets.FS) targets.FS {
		return &pauseRenameFS{FS: &hookFS{FS: fsys, before: func(op, name string) {
			if op == "rename" && name == lockFile {
				readOnce.Do(func() { close(bRead); <-aHolds })
			}
		}}, after: func(from, _ string) {
			if from == lockFile {
				movedOnce.Do(func() { close(bMoved); <-cTried })
			}
		}}
	})
	a := lockSession(t, r, false, nil)
	c := lockSession(t, r, false, nil)

	bDone := make(chan error, 1)
	go func() {
		lk, err := b.acquireLock(context.Background(), "deploy")
		if err == nil {
			lk.release()
		}
		bDone <- err
	}()
	<-bRead
	lkA, err := a.acquireLock(context.Background(), "deploy")
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	close(aHolds)
	<-bMoved // B has moved A's lock aside.
	lkC, errC := c.acquireLock(context.Background(), "deploy")
	close(cTried)
	if errC == nil {
		t.Errorf("C took the lock while A held it (lock file now %q, A's %q, C's %q)", heldLockID(t, r), lkA.id, lkC.id)
		lkC.release()
	}
	if err := <-bDone; err == nil {
		t.Errorf("B took the lock while A held it")
	}
	if id := heldLockID(t, r); id != lkA.id {
		t.Errorf("the lock file holds %q, not A's %q", id, lkA.id)
	}
	lkA.release()
	entries, err := os.ReadDir(filepath.Join(r.wfDir, StateDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".lock") {
			t.Errorf("left behind after A released: %s", e.Name())
		}
	}
}

// TestLockMovedAsideLeftBehind: a lock moved aside by a deploy killed
// while it compared it (kill -9 between the rename and the putting back).
// A dead process's lock there is removed by the next deploy, which takes
// the lock; a live deploy's of another machine keeps the project locked,
// naming it, until --break-lock removes it.
func TestLockMovedAsideLeftBehind(t *testing.T) {
	defer func(d time.Duration) { lockSettle = d }(lockSettle)
	lockSettle = 200 * time.Millisecond
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(r.wfDir, StateDir)
	aside := ".wordcount.lock.old-0123456789ab"
	for _, tc := range []struct {
		name   string
		owner  lockInfo
		breaks bool
		locked bool
	}{
		{"dead", lockInfo{ID: "dead", User: "ci", Host: host, PID: dead.Process.Pid}, false, false},
		{"live elsewhere", lockInfo{ID: "other", User: "ci", Host: "build-7", PID: 4242, Command: "deploy"}, false, true},
		{"live elsewhere, broken", lockInfo{ID: "other", User: "ci", Host: "build-7", PID: 4242}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.owner.Project, tc.owner.Since = "wordcount", time.Now().Add(-time.Minute)
			data, _ := json.Marshal(tc.owner)
			writeFiles(t, state, map[string]string{aside: string(data)})
			s := lockSession(t, r, tc.breaks, nil)
			lk, err := s.acquireLock(context.Background(), "deploy")
			if tc.locked {
				var le *LockedError
				if !errors.As(err, &le) || !strings.Contains(le.Owner, "ci@build-7 (pid 4242") {
					t.Fatalf("want the project locked by ci@build-7, got %v", err)
				}
				if id := heldLockID(t, r); id != "" {
					t.Errorf("the refused deploy left its lock %q", id)
				}
				os.Remove(filepath.Join(state, aside))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lk.release()
			if _, err := os.Stat(filepath.Join(state, aside)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the lock moved aside is still there: %v", err)
			}
		})
	}
}

// TestReleaseRemovesItsLockMovedAside: a deploy whose lock another moved
// aside and could not put back removes it there when it ends, so the
// project is not left locked by a deploy that is over.
func TestReleaseRemovesItsLockMovedAside(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	r := newRemote(t, srv, localCore, srv.Root+"/hdfs")
	s := lockSession(t, r, false, nil)
	lk, err := s.acquireLock(context.Background(), "deploy")
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(r.wfDir, StateDir)
	aside := filepath.Join(state, ".wordcount.lock.old-0123456789ab")
	if err := os.Rename(filepath.Join(state, "wordcount.lock"), aside); err != nil {
		t.Fatal(err)
	}
	lk.release()
	if _, err := os.Stat(aside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the released lock is still there, moved aside: %v", err)
	}
}
