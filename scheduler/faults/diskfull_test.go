package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// TestDiskFull: the state database on a full file system (a 1 MiB tmpfs,
// filled up). The test re-runs itself in a private mount namespace
// (unshare -m, as root), so the mount is seen by nobody else and goes away
// with the process.
func TestDiskFull(t *testing.T) {
	if os.Getenv("CELOS_DISKFULL_HELPER") == "1" {
		diskFullHelper(t)
		return
	}
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	if os.Geteuid() != 0 {
		skipOrFailInCI(t, "needs root to mount a tmpfs in a private mount namespace (run as root)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		skipOrFailInCI(t, "no unshare command (util-linux): %v", err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", os.Args[0], "-test.run=^TestDiskFull$", "-test.v")
	cmd.Env = append(os.Environ(), "CELOS_DISKFULL_HELPER=1", "CELOS_DISKFULL_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "SKIP-HELPER") {
		skipOrFailInCI(t, "cannot mount a tmpfs here:\n%s", out)
	}
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "diskfull:") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// diskFullHelper runs inside the private mount namespace.
func diskFullHelper(t *testing.T) {
	base := os.Getenv("CELOS_DISKFULL_DIR")
	mnt := filepath.Join(base, "tmpfs")
	os.MkdirAll(mnt, 0o755)
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,nr_inodes=4096"); err != nil {
		fmt.Println("SKIP-HELPER mount:", err)
		return
	}
	defer syscall.Unmount(mnt, 0)

	wfDir, dbDir := filepath.Join(base, "wf"), filepath.Join(mnt, "db")
	os.MkdirAll(wfDir, 0o755)
	t0 := time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)
	var wfs []workflow.Workflow
	for i := 0; i < 20; i++ {
		w := fixture.Hourly(fmt.Sprintf("wf%02d", i))
		w.SchedulingStrategy.Concurrency = 10
		w.StartTime = t0
		wfs = append(wfs, w)
	}
	fixture.WriteProject(t, wfDir, "full", wfs...)
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := &countingService{}
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: svc},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := t0.Add(2*time.Hour + 30*time.Minute)
	if err := eng.Step(ctx, now, nil); err != nil { // 60 slots READY
		t.Fatal(err)
	}
	// Fill the file system: a big file, then small ones until no inode or block is left.
	filler := filepath.Join(mnt, "filler")
	f, _ := os.Create(filler)
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	for i := 0; ; i++ {
		if err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("small%d", i)), []byte("x"), 0o644); err != nil {
			break
		}
	}
	before := snapshot(t, dbDir)

	for _, at := range []time.Time{now, now.Add(time.Hour)} {
		err := eng.Step(ctx, at, nil)
		if !errors.Is(err, engine.ErrPersist) {
			t.Fatalf("step at %s on a full disk: %v", slot.FormatTime(at), err)
		}
		fmt.Println("diskfull: step failed as it should:", strings.SplitN(err.Error(), ": ", 2)[0], "…", lastPart(err.Error()))
	}
	if n := svc.count(); n != 0 {
		t.Errorf("%d jobs submitted without a recorded submit intent", n)
	}
	after := snapshot(t, dbDir)
	for p := range after {
		if strings.Contains(p, ".tmp-") {
			t.Errorf("temporary file left on the full disk: %s", p)
		}
	}
	// Files are unchanged; new (empty) day directories may appear: on
	// tmpfs a directory needs an inode but no block.
	newDirs := 0
	for p, v := range after {
		if w, ok := before[p]; !ok && strings.HasSuffix(p, "/") {
			newDirs++
		} else if !ok || w != v {
			t.Errorf("the state directory changed on a full disk: %s", p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("removed on a full disk: %s", p)
		}
	}
	fmt.Printf("diskfull: no file changed, added or left half-written (%d empty day directories made)\n", newDirs)

	// Space again: the next step does the work.
	os.Remove(filler)
	entries, _ := os.ReadDir(mnt)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "small") {
			os.Remove(filepath.Join(mnt, e.Name()))
		}
	}
	if err := eng.Step(ctx, now.Add(time.Hour), nil); err != nil {
		t.Fatalf("step after space was freed: %v", err)
	}
	if n := svc.count(); n != 60 {
		t.Errorf("%d submissions after space was freed, want 60", n)
	}
	fmt.Printf("diskfull: after freeing space: %d submissions, no partial file\n", svc.count())
}

func lastPart(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
