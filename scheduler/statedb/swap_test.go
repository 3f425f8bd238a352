package statedb

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// snapshot lists everything under root: each file with its content, each
// directory and each symbolic link (with its target).
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "link to " + target
			return err
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// swapCase is one kind of write: before makes (and has the database
// remember) the directory swap, which the test then replaces by a
// symbolic link to a victim directory; after is the next write there.
type swapCase struct {
	name   string
	before func(db *DB) error
	swap   string // relative to the database
	// inside: the link points to another workflow's directory of the
	// database (this path, relative to the database), not outside.
	inside string
	after  func(db *DB) error
}

func slotAt(s string) slot.ID { return slot.ID{Workflow: "wf", Time: ts(s)} }

func putState(s string, status slot.Status) func(db *DB) error {
	return func(db *DB) error { return db.Put(slot.State{ID: slotAt(s), Status: status}) }
}

func putStates(s string) func(db *DB) error {
	return func(db *DB) error {
		return errors.Join(mapErrs(db.PutStates([]slot.State{{ID: slotAt(s), Status: slot.Ready}}))...)
	}
}

func putIntent(s string) func(db *DB) error {
	return func(db *DB) error { return db.PutIntent(slotAt(s), store.Intent{Attempt: 1, Time: ts(s)}) }
}

func mapErrs[K comparable](m map[K]error) []error {
	var out []error
	for _, err := range m {
		out = append(out, err)
	}
	return out
}

func swapCases() []swapCase {
	const day = "2015-09-13"
	owner := store.Owner{Project: "p", File: "p.json"}
	return []swapCase{
		{name: "slot state (Put)", before: putState("2015-09-13T12:00Z", slot.Waiting), swap: "state/wf/" + day,
			after: putState("2015-09-13T13:00Z", slot.Success)},
		{name: "slot state into another workflow's day (Put)", before: putState("2015-09-13T12:00Z", slot.Waiting), swap: "state/wf/" + day,
			inside: "state/other/" + day, after: putState("2015-09-13T13:00Z", slot.Success)},
		{name: "slot states (PutStates)", before: putStates("2015-09-13T12:00Z"), swap: "state/wf/" + day,
			after: putStates("2015-09-13T13:00Z")},
		{name: "slot states into another workflow's day (PutStates)", before: putStates("2015-09-13T12:00Z"), swap: "state/wf/" + day,
			inside: "state/other/" + day, after: putStates("2015-09-13T13:00Z")},
		{name: "rerun marker", before: func(db *DB) error { return db.MarkRerun(slotAt("2015-09-13T12:00Z"), ts("2015-09-14T00:00Z")) },
			swap: "rerun/wf/" + day, after: func(db *DB) error { return db.MarkRerun(slotAt("2015-09-13T13:00Z"), ts("2015-09-14T00:00Z")) }},
		{name: "submit intent (PutIntent)", before: putIntent("2015-09-13T12:00Z"), swap: "intent/wf/" + day, after: putIntent("2015-09-13T13:00Z")},
		{name: "submit intents (PutIntents)", before: putIntent("2015-09-13T12:00Z"), swap: "intent/wf/" + day,
			after: func(db *DB) error {
				return errors.Join(mapErrs(db.PutIntents(map[slot.ID]store.Intent{slotAt("2015-09-13T13:00Z"): {Attempt: 1}}))...)
			}},
		{name: "owner (SetOwner)", before: func(db *DB) error { return db.SetOwner("wf", owner) }, swap: "owner",
			after: func(db *DB) error { return db.SetOwner("other", owner) }},
		{name: "owners (WriteOwners)", before: func(db *DB) error { return db.SetOwner("wf", owner) }, swap: "owner",
			after: func(db *DB) error {
				return errors.Join(mapErrs(db.WriteOwners(map[string]store.Owner{"other": owner}, []string{"wf"}))...)
			}},
		{name: "register", before: func(db *DB) error { return db.PutRegister("b", "k", []byte(`1`)) }, swap: "register/b",
			after: func(db *DB) error { return db.PutRegister("b", "k2", []byte(`2`)) }},
		{name: "paused flag", before: func(db *DB) error { return db.SetPaused("wf", true) }, swap: "paused",
			after: func(db *DB) error { return db.SetPaused("other", true) }},
		// Removals: the victim holds a file of the name removed.
		{name: "unpause (remove)", before: func(db *DB) error { return db.SetPaused("wf", true) }, swap: "paused",
			after: func(db *DB) error { return db.SetPaused("wf", false) }},
		{name: "rerun marker (remove)", before: func(db *DB) error { return db.MarkRerun(slotAt("2015-09-13T12:00Z"), ts("2015-09-14T00:00Z")) },
			swap: "rerun/wf/" + day, after: func(db *DB) error { return db.UnmarkRerun(slotAt("2015-09-13T12:00Z")) }},
		{name: "submit intent (DeleteIntent)", before: putIntent("2015-09-13T12:00Z"), swap: "intent/wf/" + day,
			after: func(db *DB) error { return db.DeleteIntent(slotAt("2015-09-13T12:00Z")) }},
		{name: "submit intents (DeleteIntents)", before: putIntent("2015-09-13T12:00Z"), swap: "intent/wf/" + day,
			after: func(db *DB) error { return db.DeleteIntents([]slot.ID{slotAt("2015-09-13T12:00Z")}) }},
		{name: "owner (DeleteOwner)", before: func(db *DB) error { return db.SetOwner("wf", owner) }, swap: "owner",
			after: func(db *DB) error { return db.DeleteOwner("wf") }},
		{name: "register (DeleteRegister)", before: func(db *DB) error { return db.PutRegister("b", "k", []byte(`1`)) }, swap: "register/b",
			after: func(db *DB) error { return db.DeleteRegister("b", "k") }},
		{name: "prune", before: putState("2015-09-13T12:00Z", slot.Success), swap: "state/wf/" + day,
			after: func(db *DB) error {
				_, err := db.Prune(ts("2015-10-01T00:00Z"), ts("2015-11-01T00:00Z"))
				return err
			}},
		{name: "prune into another workflow's day", before: putState("2015-09-13T12:00Z", slot.Success), swap: "state/wf/" + day,
			inside: "state/other/" + day, after: func(db *DB) error {
				_, err := db.Prune(ts("2015-10-01T00:00Z"), ts("2015-11-01T00:00Z"))
				return err
			}},
		// A new day directory below a workflow directory swapped for a link.
		{name: "day directory (Put of a new day)", before: putState("2015-09-13T12:00Z", slot.Waiting), swap: "state/wf",
			after: putState("2015-09-20T12:00Z", slot.Waiting)},
		{name: "day directory (PutStates of a new day)", before: putStates("2015-09-13T12:00Z"), swap: "state/wf",
			inside: "state/other", after: putStates("2015-09-20T12:00Z")},
	}
}

// fillVictim puts into dir files with every name the writes of swapCases
// use, so that a write or removal through the link changes one.
func fillVictim(t *testing.T, dir string) {
	t.Helper()
	files := []string{"12:00:00.000Z", "13:00:00.000Z", "wf", "other", "k", "k2",
		"2015-09-13/12:00:00.000Z", "2015-09-13/13:00:00.000Z", "2015-09-20/keep"}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(`{"status":"RUNNING","precious":"`+f+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWritesThroughASwappedDirectoryAreRefused: a directory of the
// database that a write made (and the database may remember) and that is
// then replaced by a symbolic link, to a directory outside the database or
// to another workflow's directory in it, is never written, renamed into
// or removed from through the link, by any kind of write: slot states
// (Put, PutStates), rerun markers, submit intents, owner records,
// registers, paused flags, their removals, Prune and the creation of a
// day directory. The write fails with an error naming the link, and the
// link's target is left exactly as it was.
// Both ways of opening a directory are checked: openat2 and, as on a
// kernel without it, the walk component by component.
func TestWritesThroughASwappedDirectoryAreRefused(t *testing.T) {
	t.Run("openat2", func(t *testing.T) { testSwappedDirectories(t) })
	t.Run("component walk", func(t *testing.T) {
		noOpenat2.Store(true)
		t.Cleanup(func() { noOpenat2.Store(false) })
		testSwappedDirectories(t)
	})
}

func testSwappedDirectories(t *testing.T) {
	for _, c := range swapCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := t.TempDir()
			db := open(t, dir)
			if err := c.before(db); err != nil {
				t.Fatalf("first write: %v", err)
			}
			link := filepath.Join(dir, c.swap)
			target := victim
			if c.inside != "" {
				victim = filepath.Join(dir, c.inside)
				target, _ = filepath.Rel(filepath.Dir(link), victim)
			}
			fillVictim(t, victim)
			want := snapshot(t, victim)
			if err := os.RemoveAll(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			err := c.after(db)
			if d := cmp.Diff(want, snapshot(t, victim)); d != "" {
				t.Errorf("the write changed the link's target %s (-before +after):\n%s", victim, d)
			}
			if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("write through %s (a link to %s): error %v, want one naming the link as a symbolic link", link, target, err)
			}
		})
	}
}

// openFDs counts the descriptors the process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestBatchOverManyDirectoriesHoldsBoundedDescriptors: a batch whose
// states are in more day directories than maxOpenDirs writes every one of
// them, holds at most maxOpenDirs directory descriptors at a time (counted
// at its syncfs, between the temporary files and the renames) and none
// once it has committed; so do single writes and removals.
func TestBatchOverManyDirectoriesHoldsBoundedDescriptors(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	start := ts("2000-01-01T00:00Z")
	var sts []slot.State
	for d := range maxOpenDirs + 200 {
		for _, wf := range []string{"a", "b"} {
			sts = append(sts, slot.State{ID: slot.ID{Workflow: wf, Time: start.Add(time.Duration(d) * 24 * time.Hour)}, Status: slot.Ready})
		}
	}
	before := openFDs(t)
	most := 0
	syncFS = func(fd int) error {
		most = max(most, openFDs(t)-before)
		return unix.Syncfs(fd)
	}
	t.Cleanup(func() { syncFS = unix.Syncfs })
	if failed := db.PutStates(sts); failed != nil {
		t.Fatalf("PutStates: %v", failed)
	}
	if most > maxOpenDirs+1 { // and the root
		t.Errorf("%d descriptors open during a batch over %d directories, want at most %d", most, 2*(maxOpenDirs+200), maxOpenDirs+1)
	}
	if err := db.Put(slot.State{ID: sts[0].ID, Status: slot.Success}); err != nil {
		t.Fatal(err)
	}
	if err := db.MarkRerun(sts[0].ID, start); err != nil {
		t.Fatal(err)
	}
	if err := db.UnmarkRerun(sts[0].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Prune(start.Add(30*24*time.Hour), start.Add(60*24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the one final slot", n, err)
	}
	if got := openFDs(t); got != before {
		t.Errorf("%d descriptors open after the writes, %d before", got, before)
	}
	db2 := open(t, copyDir(t, dir))
	for _, st := range sts[2:] {
		if got, found, err := db2.Get(st.ID); err != nil || !found || got != st {
			t.Fatalf("%s after reopening: %+v %v %v", st.ID, got, found, err)
		}
	}
}

// TestOwnersNotReadThroughASymlinkedDirectory: an owner/ swapped for a
// link to another directory is not listed (nor its files read as owner
// records): Owners fails naming it.
func TestOwnersNotReadThroughASymlinkedDirectory(t *testing.T) {
	dir, victim := t.TempDir(), t.TempDir()
	db := open(t, dir)
	if err := db.SetOwner("wf", store.Owner{Project: "p", File: "p.json"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "other"), []byte(`{"project":"q","file":"q.json"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "owner")
	if err := os.RemoveAll(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	owners, err := db.Owners()
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Owners through a symlinked owner/ = %v, %v; want an error naming %s", owners, err, link)
	}
}
