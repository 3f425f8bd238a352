package statedb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/store"
)

// TestRuns: a workflow's record of submissions (run/<wf>) is replaced
// whole, kept to the millisecond (rounded up, never earlier), survives a
// reopen, and a record that is not one (garbage, a directory, a symbolic
// link) is an error naming the file, not its content, and a problem of
// the database.
func TestRuns(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenWith(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	if got, err := db.Runs("wf"); err != nil || got != nil {
		t.Fatalf("Runs of a workflow without a record: %v, %v", got, err)
	}
	runs := []store.Run{
		{Slot: at("2026-11-24T00:00:00Z"), Attempt: 0, At: at("2026-11-24T03:00:30.0001Z")},
		{Slot: at("2026-11-24T01:00:00Z"), Attempt: 1, At: at("2026-11-24T07:00:30Z")},
	}
	if failed := db.PutRuns(map[string][]store.Run{"wf": runs, "other": runs[:1]}); failed != nil {
		t.Fatal(failed)
	}
	if failed := db.PutRuns(map[string][]store.Run{"wf": runs[1:]}); failed != nil {
		t.Fatal(failed)
	}
	db.Close()
	db, err = OpenWith(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Runs("wf")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(runs[1:], got); d != "" {
		t.Fatalf("runs after a reopen (-want +got):\n%s", d)
	}
	got, _ = db.Runs("other")
	if want := at("2026-11-24T03:00:30.001Z"); len(got) != 1 || !got[0].At.Equal(want) {
		t.Fatalf("runs of other: %v, want one at %s (rounded up)", got, want)
	}

	path := filepath.Join(dir, "run", "wf")
	for name, write := range map[string]func() error{
		"garbage": func() error { return os.WriteFile(path, []byte("SECRET-CONTENT"), 0o644) },
		"negative": func() error {
			return os.WriteFile(path, []byte(`[{"slot":"2026-11-24T00:00:00Z","attempt":-1,"at":"2026-11-24T00:00:00Z"}]`), 0o644)
		},
		"directory":     func() error { return os.Mkdir(path, 0o755) },
		"symbolic link": func() error { return os.Symlink(filepath.Join(dir, "run", "other"), path) },
	} {
		os.RemoveAll(path)
		if err := write(); err != nil {
			t.Fatal(err)
		}
		_, err := db.Runs("wf")
		if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: Runs = %v, want an error naming %s", name, err, path)
		}
		if p := db.Problems(); len(p) != 1 || !strings.HasPrefix(p[0], filepath.Join("run", "wf")+": ") {
			t.Errorf("%s: problems %v", name, p)
		}
	}
	// Written again: the problem goes.
	os.RemoveAll(path)
	if failed := db.PutRuns(map[string][]store.Run{"wf": runs}); failed != nil {
		t.Fatal(failed)
	}
	if p := db.Problems(); len(p) != 0 {
		t.Errorf("problems after the record was written again: %v", p)
	}
	if failed := db.PutRuns(map[string][]store.Run{".hidden": runs}); !errors.Is(failed[".hidden"], store.ErrBadName) {
		t.Errorf("a bad workflow name: %v", failed)
	}
	if _, err := db.Runs("../x"); !errors.Is(err, store.ErrBadName) {
		t.Errorf("Runs of a bad workflow name: %v", err)
	}
}
