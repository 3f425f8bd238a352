package statedb

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/internal/testenv/storetest"
)

// TestPutRegistersSyncsBeforeAndAfterTheRenames: the records' contents
// are made durable by a first syncfs before any is renamed into place,
// the renames by a second; no fsync of each file or of the directory
// (a new bucket's directory is made durable by the first syncfs). A
// removal batch costs one fsync of the bucket's directory.
func TestPutRegistersSyncsBeforeAndAfterTheRenames(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	const n = 50
	kv := make(map[string]json.RawMessage, n)
	for i := range n {
		kv[fmt.Sprintf("k-%02d", i)] = json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))
	}
	present := func() int {
		entries, _ := os.ReadDir(filepath.Join(dir, "register", "outbox"))
		c := 0
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				c++
			}
		}
		return c
	}
	var syncs []string
	syncFS = func(fd int) error {
		syncs = append(syncs, fmt.Sprintf("syncfs with %d of %d in place", present(), n))
		return unix.Syncfs(fd)
	}
	t.Cleanup(func() { syncFS = unix.Syncfs })
	dirSyncs := db.dirSyncs.Load()
	if failed := db.PutRegisters("outbox", kv); failed != nil {
		t.Fatal(failed)
	}
	want := []string{
		"syncfs with 0 of 50 in place",  // the contents, before any rename
		"syncfs with 50 of 50 in place", // the renames
	}
	if d := cmp.Diff(want, syncs); d != "" {
		t.Errorf("file-system syncs of PutRegisters (-want +got):\n%s", d)
	}
	if d := db.dirSyncs.Load() - dirSyncs; d != 0 {
		t.Errorf("%d directory fsyncs besides the syncfs", d)
	}
	if got := storetest.Contents(t, db, "outbox"); len(got) != n || got["k-07"] != `{"i": 7}` {
		t.Errorf("bucket after the batch: %d keys, k-07 %q", len(got), got["k-07"])
	}
	syncs = nil
	dirSyncs = db.dirSyncs.Load()
	keys := make([]string, 0, n)
	for k := range kv {
		keys = append(keys, k)
	}
	if failed := db.DeleteRegisters("outbox", keys); failed != nil {
		t.Fatal(failed)
	}
	if d := db.dirSyncs.Load() - dirSyncs; d != 1 || len(syncs) != 0 {
		t.Errorf("removing %d keys: %d directory fsyncs and syncfs %q, want one directory fsync", n, d, syncs)
	}
	if p := present(); p != 0 {
		t.Errorf("%d keys left", p)
	}
}

// TestPutRegistersSyncFailure: a failed sync fails every key of the
// batch, naming it and the sync.
func TestPutRegistersSyncFailure(t *testing.T) {
	db := open(t, t.TempDir())
	syncFS = func(int) error { return errors.New("injected: syncfs failed") }
	t.Cleanup(func() { syncFS = unix.Syncfs })
	failed := db.PutRegisters("outbox", map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`2`)})
	if len(failed) != 2 || !strings.Contains(failed["a"].Error(), "put register outbox/a") || !strings.Contains(failed["b"].Error(), "injected") {
		t.Fatalf("failed: %v", failed)
	}
}

const registersCrashEnv = "CELOS_TEST_REGISTERS_CRASH_DIR"

// TestPutRegistersKilledMidBatch kills (SIGKILL) a process that writes
// batches of 1,000 new registers (as a step writes its outbox records)
// while it renames them into place (the child says when its first sync
// is done), at a moment that moves from one round to the next. Afterwards every batch
// the child saw return is whole, and every key listed is whole: its
// batch's record, never torn, never a temporary file — what the engine
// assumes of the outbox after a crash (a record is there or not; one
// whose state was not written is checked against its slot).
func TestPutRegistersKilledMidBatch(t *testing.T) {
	const n = 1000
	if dir := os.Getenv(registersCrashEnv); dir != "" {
		registersCrashChild(dir, n)
		return
	}
	for round := range 4 {
		dir := t.TempDir()
		cmd, sc, deadline := startCrashChild(t, "TestPutRegistersKilledMidBatch", registersCrashEnv, dir)
		begun, done := 0, 0
		for sc.Scan() {
			switch sc.Text() {
			case "batch":
				begun++
			case "done":
				done++
			}
			if begun == round+3 && sc.Text() == "renaming" {
				break
			}
		}
		deadline.Stop()
		time.Sleep(time.Duration(round) * time.Millisecond) // a different moment of the renames each round
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if begun < round+3 {
			t.Fatalf("round %d: the child began %d batches before it ended", round, begun)
		}
		db := open(t, dir)
		got := storetest.Contents(t, db, "outbox")
		perBatch := map[int]int{}
		for k, v := range got {
			var b, i int
			if _, err := fmt.Sscanf(k, "b%d-k%d", &b, &i); err != nil {
				t.Fatalf("round %d: key %q", round, k)
			}
			if want := fmt.Sprintf(`{"batch":%d,"i":%d}`, b, i); v != want {
				t.Fatalf("round %d: %s holds %q, want %q", round, k, v, want)
			}
			perBatch[b]++
		}
		t.Logf("round %d: killed in batch %d with %d of its %d keys in place", round, begun-1, perBatch[begun-1], n)
		for b := range done {
			if perBatch[b] != n {
				t.Fatalf("round %d: batch %d returned but %d of its %d keys are there", round, b, perBatch[b], n)
			}
		}
		db.Close()
	}
}

// registersCrashChild writes batches of n new registers in dir until it
// is killed, saying "batch" as each begins, "renaming" after its first
// sync and "done" as it returns.
func registersCrashChild(dir string, n int) {
	db, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Say when a batch's first sync is done: its renames begin.
	syncs := 0
	syncFS = func(fd int) error {
		err := unix.Syncfs(fd)
		if syncs++; syncs%2 == 1 {
			fmt.Println("renaming")
		}
		return err
	}
	for b := 0; ; b++ {
		kv := make(map[string]json.RawMessage, n)
		for i := range n {
			kv[fmt.Sprintf("b%d-k%04d", b, i)] = json.RawMessage(fmt.Sprintf(`{"batch":%d,"i":%d}`, b, i))
		}
		fmt.Println("batch")
		if failed := db.PutRegisters("outbox", kv); failed != nil {
			fmt.Fprintln(os.Stderr, failed)
			os.Exit(2)
		}
		fmt.Println("done")
	}
}
