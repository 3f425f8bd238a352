package statedb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// within runs f and fails the test if it has not returned by a deadline
// generous for a loaded machine: a read that blocks on a FIFO never does.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		// Not t.Fatal: the blocked call holds the database's mutex, so
		// the test's cleanup (Close) would block too.
		panic(what + ": still blocked after 30s (a FIFO or device was opened for reading)")
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFIFOsInTheDatabaseAreReportedNotRead: a FIFO as a slot file, a rerun
// marker, a submit intent or a register neither blocks a read nor stops
// the other slots: each is reported as an unreadable record naming its
// path, as a corrupt slot file is. A symlinked slot file is not followed.
func TestFIFOsInTheDatabaseAreReportedNotRead(t *testing.T) {
	dir := t.TempDir()
	good := slot.State{ID: slot.ID{Workflow: "wf", Time: ts("2015-09-13T12:00Z")}, Status: slot.Success, ExternalID: "x"}
	func() {
		db := open(t, dir)
		if err := db.Put(good); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}()
	mkfifo(t, filepath.Join(dir, "state", "wf", "2015-09-13", "13:00:00.000Z"))
	mkfifo(t, filepath.Join(dir, "rerun", "wf", "2015-09-13", "14:00:00.000Z"))
	mkfifo(t, filepath.Join(dir, "intent", "wf", "2015-09-13", "15:00:00.000Z"))
	mkfifo(t, filepath.Join(dir, "register", "b", "fifo"))
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(`{"status":"SUCCESS","externalID":"leaked","retryCount":0}`), 0o644)
	if err := os.Symlink(secret, filepath.Join(dir, "state", "wf", "2015-09-13", "16:00:00.000Z")); err != nil {
		t.Fatal(err)
	}

	db := open(t, dir)
	within(t, "read a workflow with FIFOs", func() {
		got, found, err := db.Get(good.ID)
		if err != nil || !found || got != good {
			t.Errorf("good slot beside the FIFOs: %+v %v %v", got, found, err)
		}
		_, _, err = db.Get(slot.ID{Workflow: "wf", Time: ts("2015-09-13T13:00Z")})
		if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join(dir, "state", "wf", "2015-09-13", "13:00:00.000Z")) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO slot: %v", err)
		}
		_, _, err = db.Get(slot.ID{Workflow: "wf", Time: ts("2015-09-13T16:00Z")})
		if !errors.Is(err, store.ErrCorrupt) || strings.Contains(err.Error(), "leaked") {
			t.Errorf("symlinked slot: %v", err)
		}
		if r, err := db.Range("wf", ts("2015-09-13T00:00Z"), ts("2015-09-14T00:00Z")); err != nil || len(r) != 1 {
			t.Errorf("Range = %v %v", r, err)
		}
		if a, err := db.Active("wf"); err != nil || len(a) != 0 {
			t.Errorf("Active = %v %v", a, err)
		}
		marks, err := db.RerunMarks("wf")
		if err != nil || len(marks) != 1 {
			t.Errorf("RerunMarks = %v %v", marks, err)
		}
		in, ok, err := db.GetIntent(slot.ID{Workflow: "wf", Time: ts("2015-09-13T15:00Z")})
		if err != nil || !ok || in.Attempt != -1 {
			t.Errorf("FIFO intent = %+v %v %v", in, ok, err)
		}
		_, err = db.GetRegister("b", "fifo")
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO register: %v", err)
		}
	})
	want := []string{
		"intent/wf/2015-09-13/15:00:00.000Z: not a regular file (named pipe)",
		"rerun/wf/2015-09-13/14:00:00.000Z: not a regular file (named pipe)",
		"state/wf/2015-09-13/13:00:00.000Z: not a regular file (named pipe)",
		"state/wf/2015-09-13/16:00:00.000Z: a symbolic link (not followed)",
	}
	if diff := cmp.Diff(want, db.Problems()); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	// Pruning walks the same files and finishes too.
	within(t, "prune", func() {
		if _, err := db.Prune(ts("2015-10-01T00:00Z"), ts("2015-11-01T00:00Z")); err != nil {
			t.Errorf("prune: %v", err)
		}
	})
}

// TestSymlinkedDirectoriesAreNotWalked: a workflow, day, register bucket or
// area directory that is a symbolic link is not descended into (a link to
// a directory outside the database is neither read nor written through).
func TestSymlinkedDirectoriesAreNotWalked(t *testing.T) {
	outside := t.TempDir()
	st := slot.State{ID: slot.ID{Workflow: "wf", Time: ts("2015-09-13T12:00Z")}, Status: slot.Success}
	func() {
		db := open(t, outside)
		db.Put(st)
		db.PutRegister("b", "k", []byte(`1`))
		db.SetPaused("wf", true)
		db.Close()
	}()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "state"), 0o755)
	os.Symlink(filepath.Join(outside, "state", "wf"), filepath.Join(dir, "state", "wf"))
	os.Symlink(filepath.Join(outside, "register"), filepath.Join(dir, "register"))
	os.MkdirAll(filepath.Join(dir, "state", "other"), 0o755)
	os.Symlink(filepath.Join(outside, "state", "wf", "2015-09-13"), filepath.Join(dir, "state", "other", "2015-09-13"))

	db := open(t, dir)
	within(t, "reads", func() {
		if _, found, err := db.Get(st.ID); found || err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("read through a symlinked workflow directory: %v %v", found, err)
		}
		if r, err := db.Range("other", ts("2015-09-13T00:00Z"), ts("2015-09-14T00:00Z")); len(r) != 0 || err != nil {
			t.Errorf("read through a symlinked day directory: %v %v", r, err)
		}
		if v, err := db.GetRegister("b", "k"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("read a register through a symlinked register/: %s %v", v, err)
		}
		if keys, err := db.RegisterKeys("b", ""); err == nil {
			t.Errorf("listed a register bucket through a symlinked register/: %v", keys)
		}
		if err := db.PutRegister("b", "k2", []byte(`2`)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("wrote a register through a symlinked register/: %v", err)
		}
		if err := db.Put(slot.State{ID: slot.ID{Workflow: "other", Time: ts("2015-09-13T13:00Z")}, Status: slot.Success}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("wrote a slot through a symlinked day directory: %v", err)
		}
	})
	if diff := cmp.Diff([]string{"state/other/2015-09-13: not a day directory (yyyy-MM-dd)"}, db.Problems()); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	// A symlinked paused/ is refused at Open (its flags cannot be known).
	dir2 := t.TempDir()
	os.Symlink(filepath.Join(outside, "paused"), filepath.Join(dir2, "paused"))
	if db2, err := Open(dir2); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open with a symlinked paused/: %v", err)
		if err == nil {
			db2.Close()
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "register", "b", "k2")); err == nil {
		t.Errorf("a register was written outside the database")
	}
	if _, err := os.Stat(filepath.Join(outside, "state", "wf", "2015-09-13", "13:00:00.000Z")); err == nil {
		t.Errorf("a slot was written outside the database")
	}
}

// TestSymlinkedLockFileIsRefused: .lock as a symbolic link (to a file whose
// content must survive) or as a FIFO is refused with a clear error, and
// the target is neither truncated nor written.
func TestSymlinkedLockFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, ".lock")); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir)
	if err == nil {
		db.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), filepath.Join(dir, ".lock")) {
		t.Errorf("Open over a symlinked lock: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the lock's symlink target now holds %q", b)
	}

	dir2 := t.TempDir()
	mkfifo(t, filepath.Join(dir2, ".lock"))
	within(t, "open over a FIFO lock", func() {
		db, err := Open(dir2)
		if err == nil {
			db.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Open over a FIFO lock: %v", err)
		}
	})
}

// TestDirectoryAsSlotFileIsCorrupt: a directory where a slot file,
// rerun marker or submit intent belongs is an unreadable record, as a
// FIFO is (the slot is reported and left as it was), not a stray name
// beside a slot without a record (which a step would take for a WAITING
// slot, run its trigger and fail to write at every step).
func TestDirectoryAsSlotFileIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	for _, area := range []string{"state", "rerun", "intent"} {
		if err := os.MkdirAll(filepath.Join(dir, area, "wf", "2015-09-13", "13:00:00.000Z"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := open(t, dir)
	id := slot.ID{Workflow: "wf", Time: ts("2015-09-13T13:00Z")}
	_, _, err := db.Get(id)
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Join(dir, "state", "wf", "2015-09-13", "13:00:00.000Z")) || !strings.Contains(err.Error(), "not a regular file (directory)") {
		t.Errorf("Get of a slot whose file is a directory: %v, want ErrCorrupt naming it as a directory", err)
	}
	if marks, err := db.RerunMarks("wf"); err != nil || len(marks) != 1 {
		t.Errorf("RerunMarks = %v %v, want the directory's slot marked (as an unreadable marker)", marks, err)
	}
	if in, ok, err := db.GetIntent(id); err != nil || !ok || in.Attempt != -1 {
		t.Errorf("GetIntent = %+v %v %v, want an unreadable intent (Attempt -1)", in, ok, err)
	} else if fi, err := os.Lstat(filepath.Join(dir, "intent", "wf", "2015-09-13", "13:00:00.000Z")); err != nil {
		t.Fatal(err)
	} else if !in.Time.Equal(fi.ModTime()) {
		t.Errorf("the unreadable intent's time is %v, want its modification time %v", in.Time, fi.ModTime())
	}
	want := []string{
		"intent/wf/2015-09-13/13:00:00.000Z: not a regular file (directory)",
		"rerun/wf/2015-09-13/13:00:00.000Z: not a regular file (directory)",
		"state/wf/2015-09-13/13:00:00.000Z: not a regular file (directory)",
	}
	if diff := cmp.Diff(want, db.Problems()); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestParseStateQuotesNoContent: a slot file's errors say what is wrong
// with it, never echo its bytes (they are shown by the API's problems and
// the UI to anyone who can read them); a short status name is quoted.
func TestParseStateQuotesNoContent(t *testing.T) {
	const secret = "root:$6$SECRETHASH:19000:0:99999:7:::"
	for _, data := range []string{
		`{"status":"` + secret + `"}`,
		`{"status":"SUCCESS","retryCount":"` + secret + `"}`,
		`{"status":"SUCCESS","retryCount":{"x":"` + secret + `"}}`,
		`{"status":"SUCCESS","externalID":["` + secret + `"]}`,
		`{"status":"SUCCESS"} "` + secret + `"`,
	} {
		_, _, _, err := ParseState([]byte(data))
		if err == nil {
			t.Errorf("ParseState(%s) accepted", data)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("ParseState(%s): error quotes the content: %v", data, err)
		}
	}
	if _, _, _, err := ParseState([]byte(`{"status":"SUCCES"}`)); err == nil || !strings.Contains(err.Error(), `"SUCCES"`) {
		t.Errorf("a mistyped status is not named: %v", err)
	}
}

// TestWritesAfterDirectoriesRemovedUnderTheServer: an operator who
// removes a workflow's directories (state/<wf>, rerun/<wf>, intent/<wf>)
// while the server runs does not stop that workflow's writes until the
// next restart: the directories the database had made (and remembered)
// are made again, by every kind of write.
func TestWritesAfterDirectoriesRemovedUnderTheServer(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	id := func(s string) slot.ID { return slot.ID{Workflow: "wf", Time: ts(s)} }
	next := func(s string) slot.ID { return slot.ID{Workflow: "wf", Time: ts(s).Add(time.Minute)} }
	write := func(round string, t0 string) {
		t.Helper()
		if err := db.Put(slot.State{ID: id(t0), Status: slot.Success}); err != nil {
			t.Errorf("%s: Put: %v", round, err)
		}
		if failed := db.PutStates([]slot.State{{ID: next(t0), Status: slot.Success}}); len(failed) > 0 {
			t.Errorf("%s: PutStates: %v", round, failed)
		}
		if failed := db.PutIntents(map[slot.ID]store.Intent{id(t0): {Attempt: 0, Time: ts(t0)}}); len(failed) > 0 {
			t.Errorf("%s: PutIntents: %v", round, failed)
		}
		if err := db.PutIntent(next(t0), store.Intent{Attempt: 0, Time: ts(t0)}); err != nil {
			t.Errorf("%s: PutIntent: %v", round, err)
		}
		if err := db.MarkRerun(id(t0), ts(t0)); err != nil {
			t.Errorf("%s: MarkRerun: %v", round, err)
		}
		if err := db.SetPaused("wf", round == "first"); err != nil {
			t.Errorf("%s: SetPaused: %v", round, err)
		}
	}
	write("first", "2015-09-13T12:00Z")
	for _, area := range []string{"state", "rerun", "intent", "paused"} {
		if err := os.RemoveAll(filepath.Join(dir, area)); err != nil {
			t.Fatal(err)
		}
	}
	write("after the removal", "2015-09-13T13:00Z")
	for _, p := range []string{"state/wf/2015-09-13/13:00:00.000Z", "state/wf/2015-09-13/13:01:00.000Z", "rerun/wf/2015-09-13/13:00:00.000Z", "intent/wf/2015-09-13/13:00:00.000Z", "intent/wf/2015-09-13/13:01:00.000Z"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("after the removal: %v", err)
		}
	}
}

// TestMarkerErrorsQuoteNoContent: an unreadable rerun marker or submit
// intent is reported (Problems) without its content.
func TestMarkerErrorsQuoteNoContent(t *testing.T) {
	dir := t.TempDir()
	const secret = "root:$6$SECRETHASH:19000:0:99999:7:::"
	for area, data := range map[string]string{
		"rerun":  `{"rerunTime":"` + secret + `"}`,
		"intent": `{"attempt":0,"time":"` + secret + `"}`,
	} {
		p := filepath.Join(dir, area, "wf", "2015-09-13", "13:00:00.000Z")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := open(t, dir)
	if _, err := db.RerunMarks("wf"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"intent/wf/2015-09-13/13:00:00.000Z: time is not an ISO 8601 time (a string of 37 bytes)",
		"rerun/wf/2015-09-13/13:00:00.000Z: rerunTime is not an ISO 8601 time (a string of 37 bytes)",
	}
	if diff := cmp.Diff(want, db.Problems()); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestWriteOverADirectory: a rerun or kill writes the slot's records
// where a directory stands in for one (its reads are unreadable records,
// TestDirectoryAsSlotFileIsCorrupt). An empty directory is replaced; one
// that holds something is left as it is, and the write fails wrapping
// store.ErrCorrupt, naming it and saying to remove it (it failed with a
// bare "is a directory", which the API answered as a 500). A removal (of
// a submit intent) is the same.
func TestWriteOverADirectory(t *testing.T) {
	dir := t.TempDir()
	id := slot.ID{Workflow: "wf", Time: ts("2015-09-13T13:00Z")}
	other := slot.ID{Workflow: "wf", Time: ts("2015-09-13T14:00Z")}
	for _, area := range []string{"state", "rerun", "intent"} {
		if err := os.MkdirAll(filepath.Join(dir, area, "wf", "2015-09-13", "13:00:00.000Z"), 0o755); err != nil {
			t.Fatal(err)
		}
		full := filepath.Join(dir, area, "wf", "2015-09-13", "14:00:00.000Z")
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := open(t, dir)
	if err := db.MarkRerun(id, ts("2015-09-14T00:00Z")); err != nil {
		t.Errorf("MarkRerun over an empty directory: %v", err)
	}
	if err := db.Put(slot.NewWaiting(id)); err != nil {
		t.Errorf("Put over an empty directory: %v", err)
	}
	if st, found, err := db.Get(id); err != nil || !found || st.Status != slot.Waiting {
		t.Errorf("Get after the write = %+v %v %v, want WAITING", st, found, err)
	}
	if err := db.DeleteIntent(id); err != nil {
		t.Errorf("DeleteIntent of an empty directory: %v", err)
	}
	for _, tc := range []struct {
		area  string
		write func() error
	}{
		{"rerun", func() error { return db.MarkRerun(other, ts("2015-09-14T00:00Z")) }},
		{"state", func() error { return db.Put(slot.NewWaiting(other)) }},
		{"intent", func() error { return db.DeleteIntent(other) }},
	} {
		err := tc.write()
		path := filepath.Join(dir, tc.area, "wf", "2015-09-13", "14:00:00.000Z")
		if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("%s over a directory that holds a file: %v, want store.ErrCorrupt naming %s and saying to remove it", tc.area, err, path)
		}
		if _, err := os.Stat(filepath.Join(path, "keep")); err != nil {
			t.Errorf("%s: the directory's file: %v", tc.area, err)
		}
	}
}
