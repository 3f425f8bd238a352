package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, sync := range []bool{true, false} {
		for _, content := range []string{"one", "two, longer"} {
			if err := Write(p, []byte(content), 0o640, sync); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(p)
			if err != nil || string(b) != content {
				t.Fatalf("%q %v", b, err)
			}
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o644, true); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}

// TestWriteNeverFollowsSymlinks: a symbolic link at the target is replaced
// by the file (its target keeps its content), and the temporary file is a
// new regular file of mode 0600.
func TestWriteNeverFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f")
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new"), 0o644, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the link's target was written: %q", b)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("target is not a regular file now: %v %v", fi, err)
	}
	f, err := CreateTemp(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Lstat(f.Name()); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("temp file %v %v", fi, err)
	}
}

// TestSyncDirRefusesAFIFO: a FIFO where a directory is expected fails at
// once instead of blocking the open.
func TestSyncDirRefusesAFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- SyncDir(p) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("SyncDir of a FIFO succeeded")
		}
	case <-time.After(30 * time.Second):
		panic("SyncDir of a FIFO still blocked after 30s")
	}
}
