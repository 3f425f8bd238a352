package statedb

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler/store"
)

// TestWriteOwners: records set and removed together, a removal of a
// missing record and of one also set, bad names refused by name, and the
// result read back after a reopen.
func TestWriteOwners(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	if err := db.SetOwner("old", store.Owner{Project: "p", File: "p.json"}); err != nil {
		t.Fatal(err)
	}
	failed := db.WriteOwners(map[string]store.Owner{
		"a":    {Project: "p", File: "p.json"},
		"b.c":  {Project: "q", File: "q.json"},
		"kept": {Project: "q", File: "q.json"},
		"../x": {Project: "q", File: "q.json"},
	}, []string{"old", "missing", "kept", ".hidden"})
	if len(failed) != 2 || !errors.Is(failed["../x"], store.ErrBadName) || !errors.Is(failed[".hidden"], store.ErrBadName) {
		t.Fatalf("failed: %v", failed)
	}
	db.Close()
	db = open(t, dir)
	got, err := db.Owners()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Owner{
		"a":    {Project: "p", File: "p.json"},
		"b.c":  {Project: "q", File: "q.json"},
		"kept": {Project: "q", File: "q.json"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("owners after WriteOwners and a reopen (-want +got):\n%s", d)
	}
	if p := db.Problems(); len(p) != 0 {
		t.Fatalf("problems: %v", p)
	}
	if failed := db.WriteOwners(nil, nil); failed != nil {
		t.Fatalf("an empty WriteOwners: %v", failed)
	}
}

// TestWriteOwnersSyncsTwiceWhateverTheCount: 500 records cost two syncfs
// (the temporary files' contents before any rename, then the renames), not
// two fsyncs each; removals one more. At the first sync no record has been
// replaced yet.
func TestWriteOwnersSyncsTwiceWhateverTheCount(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	set := make(map[string]store.Owner)
	for i := range 500 {
		wf := fmt.Sprintf("wf-%03d", i)
		if i < 10 {
			if err := db.SetOwner(wf, store.Owner{Project: "old", File: "old.json"}); err != nil {
				t.Fatal(err)
			}
		}
		set[wf] = store.Owner{Project: "new", File: "new.json"}
	}
	if err := db.SetOwner("gone", store.Owner{Project: "old", File: "old.json"}); err != nil {
		t.Fatal(err)
	}
	// replaced counts the records of wf-000..wf-009 that say "new".
	replaced := func() int {
		n := 0
		for i := range 10 {
			data, err := os.ReadFile(filepath.Join(dir, "owner", fmt.Sprintf("wf-%03d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), `"new"`) {
				n++
			}
		}
		return n
	}
	var syncs []string
	syncFS = func(fd int) error {
		syncs = append(syncs, fmt.Sprintf("syncfs with %d of 10 replaced", replaced()))
		return unix.Syncfs(fd)
	}
	t.Cleanup(func() { syncFS = unix.Syncfs })
	dirSyncs := db.dirSyncs.Load()
	if failed := db.WriteOwners(set, []string{"gone"}); failed != nil {
		t.Fatal(failed)
	}
	want := []string{
		"syncfs with 0 of 10 replaced",  // the new records' contents, before any rename
		"syncfs with 10 of 10 replaced", // the renames
		"syncfs with 10 of 10 replaced", // the removal
	}
	if d := cmp.Diff(want, syncs); d != "" {
		t.Fatalf("file-system syncs of WriteOwners (-want +got):\n%s", d)
	}
	if n := db.dirSyncs.Load() - dirSyncs; n != 0 {
		t.Fatalf("%d directory fsyncs besides the syncfs", n)
	}
	got, err := db.Owners()
	if err != nil || len(got) != 500 {
		t.Fatalf("%d owners, %v", len(got), err)
	}
}

// TestWriteOwnersSyncFailure: a failed sync fails every record of the
// batch, by name.
func TestWriteOwnersSyncFailure(t *testing.T) {
	db := open(t, t.TempDir())
	syncFS = func(int) error { return errors.New("injected: syncfs failed") }
	t.Cleanup(func() { syncFS = unix.Syncfs })
	failed := db.WriteOwners(map[string]store.Owner{"a": {Project: "p", File: "f"}, "b": {Project: "p", File: "f"}}, nil)
	if len(failed) != 2 || !strings.Contains(failed["a"].Error(), "record owner of a") || !strings.Contains(failed["a"].Error(), "injected") {
		t.Fatalf("failed: %v", failed)
	}
}

const crashEnv = "CELOS_TEST_OWNERS_CRASH_DIR"

// TestWriteOwnersKilledMidBatch kills (SIGKILL) a process that rewrites
// 300 owner records over and over, alternating two versions of each, at
// a moment that moves from one round to the next; every record is then
// whole, one version or the other, never torn or missing.
func TestWriteOwnersKilledMidBatch(t *testing.T) {
	const n = 300
	if dir := os.Getenv(crashEnv); dir != "" {
		ownersCrashChild(dir, n)
		return
	}
	for round := range 4 {
		dir := t.TempDir()
		cmd, sc, deadline := startCrashChild(t, "TestWriteOwnersKilledMidBatch", crashEnv, dir)
		// Kill it once it has written round+2 batches, mid-way through the
		// next one (the child announces each batch as it begins).
		batches := 0
		for sc.Scan() {
			if sc.Text() == "batch" {
				batches++
			}
			if batches == round+3 {
				break
			}
		}
		deadline.Stop()
		time.Sleep(time.Duration(round) * 5 * time.Millisecond) // a different moment of the batch each round
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if batches < round+3 {
			t.Fatalf("round %d: the child wrote %d batches before it ended", round, batches)
		}
		db := open(t, dir)
		got, err := db.Owners()
		if err != nil {
			t.Fatal(err)
		}
		if p := db.Problems(); len(p) != 0 {
			t.Fatalf("round %d: torn records after the kill: %v", round, p)
		}
		if len(got) != n {
			t.Fatalf("round %d: %d owner records after the kill, want %d", round, len(got), n)
		}
		for wf, o := range got {
			if o != (store.Owner{Project: "even", File: "even.json"}) && o != (store.Owner{Project: "odd", File: "odd.json"}) {
				t.Fatalf("round %d: %s records %+v", round, wf, o)
			}
		}
		db.Close()
	}
}

// ownersCrashChild rewrites n owner records in dir until it is killed.
func ownersCrashChild(dir string, n int) {
	db, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		o := store.Owner{Project: "even", File: "even.json"}
		if i%2 == 1 {
			o = store.Owner{Project: "odd", File: "odd.json"}
		}
		set := make(map[string]store.Owner, n)
		for j := range n {
			set[fmt.Sprintf("wf-%03d", j)] = o
		}
		fmt.Println("batch")
		if failed := db.WriteOwners(set, nil); failed != nil {
			fmt.Fprintln(os.Stderr, failed)
			os.Exit(2)
		}
	}
}

// startCrashChild runs the test name of this binary as a child process
// with env=dir set (the child writes in dir and announces its progress
// on stdout, line by line), killed if it still runs after 2 minutes. The
// caller reads the scanner, kills the child when it chooses, and waits
// for it, then stops the returned timer.
func startCrashChild(t *testing.T, name, env, dir string) (*exec.Cmd, *bufio.Scanner, *time.Timer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out), time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
}
