package statedb

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/store"

	"github.com/google/go-cmp/cmp"
)

// TestOwners: owner records survive a reopen; a corrupt record, a FIFO
// and a symbolic link in their place are left out and reported, without
// blocking; a new record replaces a corrupt one.
func TestOwners(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	if got, err := db.Owners(); err != nil || len(got) != 0 {
		t.Fatalf("Owners of a new database: %v, %v", got, err)
	}
	want := map[string]store.Owner{
		"wordcount-nyc": {Project: "wordcount", File: "wordcount.json"},
		"a.b":           {Project: "p", File: "p.json"},
	}
	for wf, o := range want {
		if err := db.SetOwner(wf, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetOwner("../x", store.Owner{Project: "p", File: "p.json"}); err == nil {
		t.Fatal("SetOwner accepted a bad name")
	}
	db.Close()

	ownerDir := filepath.Join(dir, "owner")
	os.WriteFile(filepath.Join(ownerDir, "corrupt"), []byte("{"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(ownerDir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/dev/zero", filepath.Join(ownerDir, "zero"))
	db = open(t, dir)
	done := make(chan struct{})
	var got map[string]store.Owner
	var err error
	go func() {
		got, err = db.Owners()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Owners blocked")
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("owners after reopen (-want +got):\n%s", diff)
	}
	problems := strings.Join(db.Problems(), "\n")
	for _, p := range []string{"owner/corrupt: not an owner record", "owner/fifo: not a regular file (named pipe)", "owner/zero: not a regular file (symbolic link)"} {
		if !strings.Contains(problems, p) {
			t.Errorf("problems %q do not say %q", problems, p)
		}
	}
	if err := db.SetOwner("corrupt", store.Owner{Project: "q", File: "q.json"}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteOwner("a.b"); err != nil {
		t.Fatal(err)
	}
	got, _ = db.Owners()
	if got["corrupt"].Project != "q" || len(got) != 2 {
		t.Errorf("owners after replace and delete: %v", got)
	}
}
