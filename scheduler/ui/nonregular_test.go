package ui

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A --ui-config that is a named pipe or a link to a device is refused at
// once, naming what it is; it used to block the server's start (FIFO) or
// read without end (/dev/zero).
func TestLoadConfigRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo: "not a regular file (named pipe)",
		zero: "not a regular file (symbolic link to a character device)",
	} {
		done := make(chan error, 1)
		go func() { _, err := LoadConfig(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("LoadConfig(%s) = %v, want %q", filepath.Base(path), err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("LoadConfig(%s) still running after 10s", filepath.Base(path))
		}
	}
}
