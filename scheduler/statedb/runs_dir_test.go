package statedb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/store"
)

// TestRunsRefusesASymlinkedRunDirectory: Runs read run/<workflow> by its
// path, refusing only a link as the last component: a run directory
// swapped for a symbolic link to another directory was followed and the
// record there read. Now the record is read as the other records are
// (the directories opened one by one, no link followed), and the error
// names the run directory.
func TestRunsRefusesASymlinkedRunDirectory(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenWith(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Date(2026, 11, 24, 3, 0, 30, 0, time.UTC)
	if failed := db.PutRuns(map[string][]store.Run{"wf": {{Slot: at.Truncate(time.Hour), At: at}}}); failed != nil {
		t.Fatal(failed)
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	runDir := filepath.Join(dir, "run")
	if err := os.Rename(runDir, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, runDir); err != nil {
		t.Fatal(err)
	}
	runs, err := db.Runs("wf")
	if err == nil || runs != nil {
		t.Fatalf("Runs through a symbolic link as run/: %v, %v; want an error", runs, err)
	}
	if !strings.Contains(err.Error(), runDir+":") || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("Runs through a symbolic link as run/: %v; want it to name %s as a symbolic link", err, runDir)
	}
}

// TestRunsReadsUpToItsBound: a record of submissions is bounded at
// maxRunsFile (4 MiB, not the 64 KiB of a slot file): one of 200 KiB is
// read, one past the bound is refused, naming the file.
func TestRunsReadsUpToItsBound(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenWith(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 11, 17, 0, 0, 0, 0, time.UTC)
	var runs []store.Run
	for i := range 3000 {
		s := t0.Add(time.Duration(i) * time.Minute)
		runs = append(runs, store.Run{Slot: s, At: s.Add(time.Second)})
	}
	if failed := db.PutRuns(map[string][]store.Run{"wf": runs}); failed != nil {
		t.Fatal(failed)
	}
	path := filepath.Join(dir, "run", "wf")
	if fi, err := os.Stat(path); err != nil || fi.Size() < 128<<10 {
		t.Fatalf("the record is %v bytes (%v), want more than 128 KiB", fi.Size(), err)
	}
	if got, err := db.Runs("wf"); err != nil || len(got) != len(runs) {
		t.Fatalf("Runs of a record of %d submissions: %d, %v", len(runs), len(got), err)
	}
	if err := os.WriteFile(path, []byte("["+strings.Repeat(" ", maxRunsFile)+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Runs("wf"); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Runs of a record past %d bytes: %v, want an error naming %s", maxRunsFile, err, path)
	}
}
