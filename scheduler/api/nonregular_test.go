package api

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A named pipe as the token file is refused at once: opening it for
// reading used to block the server's start forever (no writer).
func TestLoadTokenRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := LoadToken(p); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (named pipe)") {
			t.Fatalf("LoadToken(FIFO) = %v, want not a regular file (named pipe)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LoadToken(FIFO) still blocked after 10s")
	}
}
