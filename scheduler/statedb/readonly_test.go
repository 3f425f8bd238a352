package statedb

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
)

// TestReadOnly: a DB opened with Options.ReadOnly reads what is there and
// writes nothing (every write fails with ErrReadOnly, the lock file is
// neither made nor written); it and a writer exclude each other through
// the lock file; a directory without one is opened, one that does not
// exist is not made.
func TestReadOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	w := open(t, dir)
	st := slot.State{ID: slot.ID{Workflow: "wf", Time: ts("2015-09-13T13:00Z")}, Status: slot.Success, ExternalID: "x"}
	if err := w.Put(st); err != nil {
		t.Fatal(err)
	}
	if err := w.SetPaused("wf", true); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWith(dir, Options{ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open of a directory a writer holds: %v, want ErrLocked", err)
	}
	w.Close()
	lock0, _ := os.ReadFile(filepath.Join(dir, ".lock"))

	ro, err := OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if readOnly, locked := ro.ReadOnly(); !readOnly || !locked {
		t.Errorf("ReadOnly() = %v, %v; want true, true", readOnly, locked)
	}
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("a writer's open while a read-only DB holds the lock: %v, want ErrLocked", err)
	}
	got, err := ro.Range("wf", ts("2015-09-13T00:00Z"), ts("2015-09-14T00:00Z"))
	if err != nil || len(got) != 1 || got[0] != st || !ro.Paused("wf") {
		t.Fatalf("read-only reads: %v %v, paused %v", got, err, ro.Paused("wf"))
	}
	st2 := st
	st2.ID.Time = ts("2015-09-13T14:00Z")
	for name, err := range map[string]error{
		"Put":       ro.Put(st2),
		"SetPaused": ro.SetPaused("wf", false),
		"MarkRerun": ro.MarkRerun(st.ID, ts("2015-09-13T15:00Z")),
		"Batch": errors.Join(func() []error {
			b := ro.Batch()
			b.Put(st2)
			var errs []error
			for _, err := range b.Commit() {
				errs = append(errs, err)
			}
			return errs
		}()...),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only DB: %v, want ErrReadOnly", name, err)
		}
	}
	ro.Close()
	if lock1, _ := os.ReadFile(filepath.Join(dir, ".lock")); string(lock1) != string(lock0) {
		t.Errorf("the read-only DB wrote the lock file: %q, was %q", lock1, lock0)
	}
	if d := cmp.Diff([]string{"wf"}, mustWorkflows(t, dir)); d != "" {
		t.Errorf("workflows after the read-only DB (-want +got):\n%s", d)
	}

	if err := os.Remove(filepath.Join(dir, ".lock")); err != nil {
		t.Fatal(err)
	}
	ro, err = OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open without a lock file: %v", err)
	}
	if _, locked := ro.ReadOnly(); locked {
		t.Errorf("ReadOnly() says locked without a lock file")
	}
	ro.Close()
	if _, err := os.Lstat(filepath.Join(dir, ".lock")); err == nil {
		t.Errorf("the read-only DB made a lock file")
	}

	missing := filepath.Join(t.TempDir(), "none")
	if _, err := OpenWith(missing, Options{ReadOnly: true}); err == nil {
		t.Errorf("read-only open of a missing directory succeeded")
	}
	if _, err := os.Lstat(missing); err == nil {
		t.Errorf("the read-only open made %s", missing)
	}
}

func mustWorkflows(t *testing.T, dir string) []string {
	t.Helper()
	db := open(t, dir)
	defer db.Close()
	wfs, err := db.Workflows()
	if err != nil {
		t.Fatal(err)
	}
	return wfs
}
