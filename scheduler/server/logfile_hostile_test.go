package server

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLogFileIsNeverFollowed: celos.log as a symbolic link (to a file that
// must keep its content) or a FIFO in --logs stops the start with an error
// naming it, at once, instead of appending log lines to the link's target
// or blocking on the FIFO.
func TestLogFileIsNeverFollowed(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(dir, LogFile)); err != nil {
		t.Fatal(err)
	}
	log, closer, err := NewLogger(os.Stderr, dir, 0)
	if err == nil {
		log.Info("written through the link")
		closer.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), filepath.Join(dir, LogFile)) {
		t.Errorf("NewLogger over a symlinked celos.log: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the link's target now holds %q", b)
	}

	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, LogFile), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, closer, err := NewLogger(os.Stderr, fifoDir, 0)
		if err == nil {
			closer.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("NewLogger over a FIFO celos.log: %v", err)
		}
	case <-time.After(30 * time.Second):
		panic("NewLogger over a FIFO celos.log still blocked after 30s")
	}
}
