package statedb

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/store"

	"github.com/celos-go/celos/scheduler/slot"
	"golang.org/x/sys/unix"
)

func ts(s string) time.Time {
	t, err := slot.ParseTime(s)
	if err != nil {
		panic(err)
	}
	return t
}

func open(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}

func TestPutGetLayout(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := slot.ID{Workflow: "wordcount", Time: ts("2015-09-13T13:40Z")}
	st := slot.State{ID: id, Status: slot.Running, ExternalID: "0000001-oozie-W", RetryCount: 1}
	if err := db.Put(st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "state", "wordcount", "2015-09-13", "13:40:00.000Z"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"time":"2015-09-13T13:40:00.000Z","status":"RUNNING","externalID":"0000001-oozie-W","retryCount":1}`; string(data) != want {
		t.Fatalf("file %s\nwant %s", data, want)
	}
	got, found, err := db.Get(id)
	if err != nil || !found || got != st {
		t.Fatalf("Get = %+v %v %v", got, found, err)
	}
	// Same state again: no write.
	w := db.Stats().Writes
	if err := db.Put(st); err != nil || db.Stats().Writes != w {
		t.Fatalf("rewrite of an unchanged state: %v, writes %d → %d", err, w, db.Stats().Writes)
	}
	// No temporary files left behind.
	matches, _ := filepath.Glob(filepath.Join(dir, "state", "wordcount", "2015-09-13", ".tmp-*"))
	if len(matches) > 0 {
		t.Fatalf("temp files left: %v", matches)
	}
	// A second DB on the directory (after Close) reads the same.
	db.Close()
	db2 := open(t, dir)
	if got, _, _ := db2.Get(id); got != st {
		t.Fatalf("reopened: %+v", got)
	}
	// The index serves repeated reads without touching files.
	r := db2.Stats().Reads
	for range 10 {
		db2.Get(id)
		db2.Range("wordcount", ts("2015-09-13T00:00Z"), ts("2015-09-14T00:00Z"))
	}
	if db2.Stats().Reads != r {
		t.Fatalf("reads grew from %d to %d", r, db2.Stats().Reads)
	}
}

func TestReadsCelosDirectory(t *testing.T) {
	dir := copyDir(t, "testdata/celos-db")
	db := open(t, dir)
	// Old format without "time"; identity from the path.
	st, found, err := db.Get(slot.ID{Workflow: "wf", Time: ts("2013-12-04T19:00Z")})
	if err != nil || !found || st.Status != slot.Success || st.ExternalID != "0000001-131204-oozie-W" {
		t.Fatalf("%+v %v %v", st, found, err)
	}
	// "time" says 19:18 but the path says 20:00: the path wins.
	st, found, _ = db.Get(slot.ID{Workflow: "wf", Time: ts("2013-12-04T20:00Z")})
	if !found || st.Status != slot.Running || st.RetryCount != 2 || !st.ID.Time.Equal(ts("2013-12-04T20:00Z")) {
		t.Fatalf("%+v", st)
	}
	if _, found, _ := db.Get(slot.ID{Workflow: "wf", Time: ts("2013-12-04T19:18Z")}); found {
		t.Fatal("slot identity taken from the time field")
	}
	marks, err := db.RerunMarks("wf")
	if err != nil || len(marks) != 1 || !marks[0].At.Equal(ts("2013-12-05T00:00Z")) {
		t.Fatalf("marks %+v %v", marks, err)
	}
	if !db.Paused("wf") || db.Paused("other") {
		t.Fatal("paused")
	}
	v, err := db.GetRegister("b", "k1")
	if err != nil || string(v) != `{"a":1}` {
		t.Fatalf("register %s %v", v, err)
	}
	active, _ := db.Active("wf")
	if len(active) != 1 || active[0].Status != slot.Running {
		t.Fatalf("active %+v", active)
	}
}

func TestCorruptFilesAreReportedNotFatal(t *testing.T) {
	dir := t.TempDir()
	day := filepath.Join(dir, "state", "wf", "2024-01-01")
	os.MkdirAll(day, 0o755)
	os.WriteFile(filepath.Join(day, "00:00:00.000Z"), []byte(`{"status":"SUCCESS","externalID":null,"retryCount":0}`), 0o644)
	os.WriteFile(filepath.Join(day, "01:00:00.000Z"), []byte(`{"status":"SUCC`), 0o644) // truncated
	os.WriteFile(filepath.Join(day, "02:00:00.000Z"), []byte(`{"status":"DONE"}`), 0o644)
	os.WriteFile(filepath.Join(day, "junk"), []byte(`x`), 0o644)
	os.WriteFile(filepath.Join(day, ".tmp-123"), []byte(`half`), 0o644) // a crash's leftover
	db := open(t, dir)
	if st, found, err := db.Get(slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}); err != nil || !found || st.Status != slot.Success {
		t.Fatalf("good slot: %+v %v %v", st, found, err)
	}
	_, _, err := db.Get(slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join(day, "01:00:00.000Z")) {
		t.Fatalf("corrupt slot: %v", err)
	}
	probs := strings.Join(db.Problems(), "\n")
	for _, want := range []string{"01:00:00.000Z: bad JSON", `02:00:00.000Z: unknown status "DONE"`, "junk: not a slot file"} {
		if !strings.Contains(probs, want) {
			t.Errorf("problems lack %q:\n%s", want, probs)
		}
	}
	if _, err := os.Stat(filepath.Join(day, ".tmp-123")); !os.IsNotExist(err) {
		t.Error("temp leftover not removed")
	}
	// Writing the slot repairs it.
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	if err := db.Put(slot.State{ID: id, Status: slot.Waiting}); err != nil {
		t.Fatal(err)
	}
	if _, found, err := db.Get(id); err != nil || !found {
		t.Fatalf("after repair: %v", err)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	_, err := Open(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second open: %v", err)
	}
	db.Close()
	db2, err := Open(dir)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	db2.Close()
}

// TestLockAcrossProcesses runs this test binary as a second process.
func TestLockAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("CELOS_STATEDB_LOCK_CHILD"); dir != "" {
		_, err := Open(dir)
		if err == nil {
			os.Exit(0)
		}
		os.Stdout.WriteString(err.Error())
		os.Exit(3)
	}
	dir := t.TempDir()
	db := open(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "CELOS_STATEDB_LOCK_CHILD="+dir)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "in use by process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("child: %v %s", err, out)
	}
	db.Close()
}

func TestNamesCannotEscape(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	for _, wf := range []string{"", ".", "..", "../x", "a/b", `a\b`, ".hidden", "a\x00b", strings.Repeat("x", 256)} {
		if err := db.Put(slot.State{ID: slot.ID{Workflow: wf, Time: ts("2024-01-01T00:00Z")}, Status: slot.Waiting}); !errors.Is(err, store.ErrBadName) {
			t.Errorf("workflow %q: %v", wf, err)
		}
		if err := db.SetPaused(wf, true); !errors.Is(err, store.ErrBadName) {
			t.Errorf("pause %q: %v", wf, err)
		}
	}
	for _, name := range []string{"", ".", "..", "../x", "a/b", "a.b", "x\n"} {
		if err := db.PutRegister(name, "k", json.RawMessage(`1`)); !errors.Is(err, store.ErrBadName) {
			t.Errorf("bucket %q: %v", name, err)
		}
		if err := db.PutRegister("b", name, json.RawMessage(`1`)); !errors.Is(err, store.ErrBadName) {
			t.Errorf("key %q: %v", name, err)
		}
		if _, err := db.GetRegister("b", name); !errors.Is(err, store.ErrBadName) {
			t.Errorf("get key %q: %v", name, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range entries {
		if e.Name() == "x" {
			t.Fatal("a file escaped the database directory")
		}
	}
}

func TestRegisters(t *testing.T) {
	db := open(t, t.TempDir())
	if _, err := db.GetRegister("b", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if keys, err := db.RegisterKeys("nobucket", ""); err != nil || len(keys) != 0 {
		t.Fatalf("%v %v", keys, err)
	}
	for _, k := range []string{"ka", "kb", "other"} {
		if err := db.PutRegister("b", k, json.RawMessage(`{"v":"`+k+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PutRegister("b", "bad", json.RawMessage(`{`)); err == nil {
		t.Fatal("invalid JSON stored")
	}
	keys, _ := db.RegisterKeys("b", "k")
	if strings.Join(keys, ",") != "ka,kb" {
		t.Fatal(keys)
	}
	if err := db.DeleteRegistersWithPrefix("b", "k"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRegister("b", "missing"); err != nil {
		t.Fatal(err)
	}
	keys, _ = db.RegisterKeys("b", "")
	if strings.Join(keys, ",") != "other" {
		t.Fatal(keys)
	}
}

func TestRerunPausedIntents(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T05:00Z")}
	if err := db.MarkRerun(id, ts("2024-02-01T00:00Z")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "rerun", "wf", "2024-01-01", "05:00:00.000Z"))
	if string(data) != `{"rerunTime":"2024-02-01T00:00:00.000Z"}` {
		t.Fatalf("marker %s", data)
	}
	marks, _ := db.RerunMarks("wf")
	if len(marks) != 1 || marks[0].Expired(ts("2024-02-15T00:00Z")) || !marks[0].Expired(ts("2024-02-15T00:00:01Z")) {
		t.Fatalf("marks %+v", marks)
	}
	if err := db.UnmarkRerun(id); err != nil {
		t.Fatal(err)
	}
	if marks, _ := db.RerunMarks("wf"); len(marks) != 0 {
		t.Fatal(marks)
	}
	if err := db.SetPaused("wf", true); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "paused", "wf")); err != nil || fi.Size() != 0 {
		t.Fatalf("paused file: %v", err)
	}
	db.SetPaused("wf", false)
	if _, err := os.Stat(filepath.Join(dir, "paused", "wf")); !os.IsNotExist(err) {
		t.Fatal("paused file not removed")
	}
	in := store.Intent{Attempt: 2, Time: ts("2024-02-01T00:00:01.5Z")}
	if err := db.PutIntent(id, in); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, dir)
	got, ok, err := db.GetIntent(id)
	if err != nil || !ok || got.Attempt != 2 || !got.Time.Equal(in.Time) {
		t.Fatalf("intent %+v %v %v", got, ok, err)
	}
	db.DeleteIntent(id)
	if _, ok, _ := db.GetIntent(id); ok {
		t.Fatal("intent not deleted")
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	now := ts("2024-03-01T00:00Z")
	put := func(at string, s slot.Status) {
		if err := db.Put(slot.State{ID: slot.ID{Workflow: "wf", Time: ts(at)}, Status: s}); err != nil {
			t.Fatal(err)
		}
	}
	put("2024-01-01T00:00Z", slot.Success)
	put("2024-01-01T01:00Z", slot.Running) // kept: not final
	put("2024-01-02T00:00Z", slot.Failure)
	put("2024-02-28T00:00Z", slot.Success) // kept: recent
	if _, err := db.Prune(now.Add(-24*time.Hour), now); err == nil {
		t.Fatal("prune inside the window allowed")
	}
	n, err := db.Prune(ts("2024-02-01T00:00Z"), now)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "wf", "2024-01-02")); !os.IsNotExist(err) {
		t.Fatal("empty day directory left")
	}
	left, _ := db.Range("wf", time.Unix(0, 0), now)
	if len(left) != 2 || left[0].Status != slot.Running {
		t.Fatalf("left %+v", left)
	}
}

func TestUnwritableDirectory(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	if _, _, err := db.Get(id); err != nil { // index loaded
		t.Fatal(err)
	}
	// A file where the state directory should be: writes fail cleanly.
	if err := os.WriteFile(filepath.Join(dir, "state"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := db.Put(slot.State{ID: id, Status: slot.Ready})
	if err == nil || !strings.Contains(err.Error(), "state database") {
		t.Fatalf("put: %v", err)
	}
	if _, found, err := db.Get(id); found || err != nil {
		t.Fatalf("failed write changed the index: %v %v", found, err)
	}
	// Open on a path that is a file.
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := Open(f); err == nil {
		t.Fatal("opened a file as a database")
	}
}

func TestBatch(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	a := slot.ID{Workflow: "a", Time: ts("2024-01-01T00:00Z")}
	b := slot.ID{Workflow: "b", Time: ts("2024-01-01T00:00Z")}
	if err := db.Put(slot.State{ID: b, Status: slot.Running, ExternalID: "x"}); err != nil {
		t.Fatal(err)
	}
	bt := db.Batch()
	if err := bt.Put(slot.State{ID: a, Status: slot.Ready}); err != nil {
		t.Fatal(err)
	}
	if err := bt.Put(slot.State{ID: a, Status: slot.WaitTimeout}); err != nil { // the last put wins
		t.Fatal(err)
	}
	if err := bt.Put(slot.State{ID: b, Status: slot.Success, ExternalID: "x"}); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := db.Get(a); st.Status != slot.WaitTimeout {
		t.Fatalf("not visible before commit: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "a")); !os.IsNotExist(err) {
		t.Fatal("written before commit")
	}
	if failed := bt.Commit(); failed != nil {
		t.Fatal(failed)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "state", "a", "2024-01-01", "00:00:00.000Z"))
	if !strings.Contains(string(data), `"WAIT_TIMEOUT"`) {
		t.Fatalf("%s", data)
	}
	// Batch-written files have the mode of single writes (0644), not
	// CreateTemp's 0600: operators and Java Celos read them.
	for _, id := range []slot.ID{a, b} {
		fi, err := os.Stat(filepath.Join(dir, "state", id.Workflow, "2024-01-01", "00:00:00.000Z"))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o644 {
			t.Fatalf("%s: mode %v, want 0644", id, perm)
		}
	}
	if act, _ := db.Active("b"); len(act) != 0 {
		t.Fatalf("b still active: %+v", act)
	}

	// A failed write takes the state back.
	bt = db.Batch()
	c := slot.ID{Workflow: "c", Time: ts("2024-01-01T00:00Z")}
	bt.Put(slot.State{ID: c, Status: slot.Ready})
	bt.Put(slot.State{ID: b, Status: slot.Failure, ExternalID: "x"}) // b is SUCCESS: allowed here, the engine decides
	os.WriteFile(filepath.Join(dir, "state", "c"), nil, 0o644)       // c's directory cannot be made
	failed := bt.Commit()
	if len(failed) != 1 || failed[c] == nil {
		t.Fatalf("failed %v", failed)
	}
	if _, found, _ := db.Get(c); found {
		t.Fatal("failed write still in the index")
	}
	if st, _, _ := db.Get(b); st.Status != slot.Failure {
		t.Fatalf("b %+v", st)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "state", "*", "*", ".tmp-*"))
	if len(matches) > 0 {
		t.Fatalf("temp files left: %v", matches)
	}
}

func TestIntentsInBulk(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	a := slot.ID{Workflow: "a", Time: ts("2024-01-01T00:00Z")}
	b := slot.ID{Workflow: "b", Time: ts("2024-01-01T00:00Z")}
	bad := slot.ID{Workflow: "../x", Time: ts("2024-01-01T00:00Z")}
	at := ts("2024-02-01T00:00Z")
	failed := db.PutIntents(map[slot.ID]store.Intent{a: {Attempt: 1, Time: at, Pool: &store.PoolClaim{Name: "etl", Limit: 1}}, b: {Time: at}, bad: {Time: at}})
	if len(failed) != 1 || !errors.Is(failed[bad], store.ErrBadName) {
		t.Fatalf("failed %v", failed)
	}
	if in, _, _ := db.GetIntent(a); in.Pool != nil {
		t.Fatalf("the intent read back has a pool claim %+v: claims are not stored", in.Pool)
	}
	db.Close()
	db = open(t, dir)
	if in, ok, _ := db.GetIntent(a); !ok || in.Attempt != 1 || !in.Time.Equal(at) {
		t.Fatalf("%+v %v", in, ok)
	}
	if fi, err := os.Stat(filepath.Join(dir, "intent", "a", "2024-01-01", "00:00:00.000Z")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("intent file: %v %v, want mode 0644", fi, err)
	}
	if err := db.DeleteIntents([]slot.ID{a, b, {Workflow: "c", Time: at}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []slot.ID{a, b} {
		if _, ok, _ := db.GetIntent(id); ok {
			t.Fatalf("%s intent left", id)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "intent", "a", "2024-01-01", "00:00:00.000Z")); !os.IsNotExist(err) {
		t.Fatal("intent file left")
	}
}

// TestFailedBatchKeepsCorruptSlotCorrupt: a batch write over a corrupt
// slot file that fails leaves the slot as it was (corrupt, an error from
// Get), not as a slot without any record.
func TestFailedBatchKeepsCorruptSlotCorrupt(t *testing.T) {
	dir := t.TempDir()
	day := filepath.Join(dir, "state", "wf", "2024-01-01")
	os.MkdirAll(day, 0o755)
	file := filepath.Join(day, "01:00:00.000Z")
	os.WriteFile(file, []byte(`{"status":"SUCC`), 0o644) // truncated
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	if _, _, err := db.Get(id); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("corrupt slot before the batch: %v", err)
	}
	// The rename onto the slot's path fails: a directory that holds a
	// file is there now (an empty one would be replaced).
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(file, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(file, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bt := db.Batch()
	if err := bt.Put(slot.State{ID: id, Status: slot.Waiting}); err != nil {
		t.Fatal(err)
	}
	if failed := bt.Commit(); failed[id] == nil {
		t.Fatalf("failed %v", failed)
	}
	if st, found, err := db.Get(id); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("after the failed write: %+v %v %v, want the corrupt error back", st, found, err)
	}
}

// TestPutFailingAfterRenameKeepsIndexWithDisk: a Put whose file was
// renamed into place but whose directory sync failed returns the error,
// and the index holds what the disk holds (the new state), as a restart
// would read it.
func TestPutFailingAfterRenameKeepsIndexWithDisk(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	if err := db.Put(slot.State{ID: id, Status: slot.Ready}); err != nil {
		t.Fatal(err)
	}
	syncRenamed = func(int) error { return errors.New("injected: sync of the directory failed") }
	t.Cleanup(func() { syncRenamed = fsync })
	if err := db.Put(slot.State{ID: id, Status: slot.Running, ExternalID: "job-1"}); err == nil {
		t.Fatal("Put: no error from the failed sync")
	}
	syncRenamed = fsync
	st, found, err := db.Get(id)
	if err != nil || !found || st.Status != slot.Running || st.ExternalID != "job-1" {
		t.Fatalf("index after the failed sync: %+v %v %v, want RUNNING job-1 as on disk", st, found, err)
	}
	db.Close()
	db = open(t, dir)
	if st, _, err := db.Get(id); err != nil || st.Status != slot.Running {
		t.Fatalf("disk: %+v %v", st, err)
	}
}

// TestIntentFailingAfterRenameKeepsIndexWithDisk: as for Put, a submit
// intent renamed into place before the error is in the index, so that
// DeleteIntent removes the file.
func TestIntentFailingAfterRenameKeepsIndexWithDisk(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	syncRenamed = func(int) error { return errors.New("injected: sync of the directory failed") }
	t.Cleanup(func() { syncRenamed = fsync })
	if err := db.PutIntent(id, store.Intent{Attempt: 1, Time: ts("2024-01-01T02:00Z")}); err == nil {
		t.Fatal("PutIntent: no error from the failed sync")
	}
	syncRenamed = fsync
	if _, ok, err := db.GetIntent(id); err != nil || !ok {
		t.Fatalf("intent on disk but not in the index: %v %v", ok, err)
	}
	if err := db.DeleteIntent(id); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, dir)
	if in, ok, _ := db.GetIntent(id); ok {
		t.Fatalf("intent left on disk: %+v", in)
	}
}

// TestIntentsFailingAfterRenameKeepIndexWithDisk: PutIntents whose last
// file-system sync fails (the renames done) reports the failure and keeps
// the intents in the index, so that DeleteIntents removes their files.
func TestIntentsFailingAfterRenameKeepIndexWithDisk(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	if _, err := db.Active("wf"); err != nil { // load the index
		t.Fatal(err)
	}
	calls := 0
	syncFS = func(fd int) error {
		calls++
		if calls == 2 { // after the renames
			return errors.New("injected: syncfs failed")
		}
		return nil
	}
	t.Cleanup(func() { syncFS = unix.Syncfs })
	if failed := db.PutIntents(map[slot.ID]store.Intent{id: {Attempt: 1, Time: ts("2024-01-01T02:00Z")}}); failed[id] == nil {
		t.Fatalf("failed %v", failed)
	}
	syncFS = unix.Syncfs
	if err := db.DeleteIntents([]slot.ID{id}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, dir)
	if in, ok, _ := db.GetIntent(id); ok {
		t.Fatalf("intent left on disk: %+v", in)
	}
}

// TestPreloadDoesNotInstallAnIndexOlderThanAReload: an index Preload read
// before a Reload (and a write after it) is not installed over the newer
// state.
func TestPreloadDoesNotInstallAnIndexOlderThanAReload(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T01:00Z")}
	preloadLoaded = func(string) {
		if err := db.Put(slot.State{ID: id, Status: slot.Running, ExternalID: "job-1"}); err != nil {
			t.Error(err)
		}
		if err := db.Reload(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { preloadLoaded = nil })
	db.Preload([]string{"wf"}, 1)
	preloadLoaded = nil
	if st, found, err := db.Get(id); err != nil || !found || st.Status != slot.Running {
		t.Fatalf("after Preload, Put, Reload: %+v %v %v, want RUNNING as on disk", st, found, err)
	}
}

// TestRegistersAfterCloseAreRefused: after Close the lock is released and
// another server may own the directory: register calls fail instead of
// writing without the lock.
func TestRegistersAfterCloseAreRefused(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	if err := db.PutRegister("b", "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for name, err := range map[string]error{
		"PutRegister":               db.PutRegister("b", "k", json.RawMessage(`2`)),
		"DeleteRegister":            db.DeleteRegister("b", "k"),
		"DeleteRegistersWithPrefix": db.DeleteRegistersWithPrefix("b", ""),
	} {
		if err == nil {
			t.Errorf("%s after Close: no error", name)
		}
	}
	if _, err := db.GetRegister("b", "k"); err == nil {
		t.Error("GetRegister after Close: no error")
	}
	if data, err := os.ReadFile(filepath.Join(dir, "register", "b", "k")); err != nil || string(data) != "1" {
		t.Fatalf("register file after Close: %q %v, want 1", data, err)
	}
}

// TestLoadInBackground: the background load returns at once, reads of a
// workflow it has not reached yet are answered (that workflow is read on
// demand), a second call while it runs starts nothing, and Close stops it
// before the next workflow.
func TestLoadInBackground(t *testing.T) {
	_, db, wfs := reopenedWithFour(t)
	t1 := ts("2024-01-01T01:00Z")
	gate := make(chan struct{})
	var mu sync.Mutex
	var read []string
	preloadLoaded = func(wf string) {
		mu.Lock()
		read = append(read, wf)
		mu.Unlock()
		<-gate
	}
	t.Cleanup(func() { preloadLoaded = nil })
	done := db.LoadInBackground(wfs, 1)
	if again := db.LoadInBackground(wfs, 1); again != done {
		t.Fatal("a second LoadInBackground while one runs started another")
	}
	for _, wf := range wfs {
		if db.Loaded(wf) {
			t.Fatalf("%s loaded before the background load passed the gate", wf)
		}
	}
	// w4 is read on demand while the background load waits at w1.
	if st, found, err := db.Get(slot.ID{Workflow: "w4", Time: t1}); err != nil || !found || st.Status != slot.Success {
		t.Fatalf("Get during the background load: %+v %v %v", st, found, err)
	}
	if !db.Loaded("w4") {
		t.Fatal("w4 not loaded after a read of it")
	}
	gate <- struct{}{} // w1 installed; the load goes on to w2 and waits
	db.Close()
	close(gate)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the background load did not end after Close")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(read) > 2 {
		t.Fatalf("the background load read %v after Close, want at most w1 and the one in progress", read)
	}
}

// TestRegisterNotJSON: a register file written by hand that is not JSON
// is an error of store.ErrCorrupt naming the file without its content,
// not a value the API would serve as application/json.
func TestRegisterNotJSON(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	if err := db.PutRegister("b", "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "register", "b", "k"), []byte("SECRET not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := db.GetRegister("b", "k")
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join("register", "b", "k")) || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("GetRegister of a file that is not JSON: %q, %v; want store.ErrCorrupt naming the file, not its content", v, err)
	}
}

// TestHasRegister: HasRegister answers as RegisterKeys lists, for every
// kind of entry a bucket directory may hold (written by hand included),
// an unknown bucket and names that are not register names.
func TestHasRegister(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	if err := db.PutRegister("b", "ka", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	bdir := filepath.Join(dir, "register", "b")
	if err := os.Mkdir(filepath.Join(bdir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(bdir, "alink")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(bdir, "afifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"bad\x01name", ".hidden", "notjson"} {
		if err := os.WriteFile(filepath.Join(bdir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := db.RegisterKeys("b", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ka", "adir", "alink", "afifo", "bad\x01name", ".hidden", "notjson", "missing", "", "a/b", strings.Repeat("k", 300)} {
		got, err := db.HasRegister("b", key)
		if want := slices.Contains(listed, key); got != want || err != nil {
			t.Errorf("HasRegister(b, %q) = %v, %v; the listing %v says %v", key, got, err, listed, want)
		}
	}
	if got, err := db.HasRegister("nobucket", "ka"); got || err != nil {
		t.Errorf("unknown bucket: %v, %v", got, err)
	}
	if _, err := db.HasRegister("a/b", "ka"); !errors.Is(err, store.ErrBadName) {
		t.Errorf("bad bucket: %v", err)
	}
	// A bucket that is a file or a link to a directory: an error, as for
	// the listing.
	if err := os.WriteFile(filepath.Join(dir, "register", "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bdir, filepath.Join(dir, "register", "link")); err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{"file", "link"} {
		_, lerr := db.RegisterKeys(bucket, "")
		_, err := db.HasRegister(bucket, "ka")
		if lerr == nil || err == nil {
			t.Errorf("bucket %s: listing %v, lookup %v; want both to fail", bucket, lerr, err)
		}
	}
}
