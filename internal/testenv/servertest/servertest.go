// Package servertest holds what tests of a celos server share, whether
// they run it in their own process or as a `celos server` process: a log
// sink the server may write from several goroutines, and a build of
// cmd/celos. See docs/testing.md.
package servertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/celos-go/celos/internal/testenv"
)

// LockedBuffer is a bytes.Buffer safe for concurrent use: a server's log
// (its Stderr, or a process's stdout and stderr) written from several
// goroutines while the test reads it. The zero value is empty and ready.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// BuildCelos builds cmd/celos into a new temporary directory named after
// pattern (as os.MkdirTemp) and returns the binary's path. The caller
// removes filepath.Dir of it when done; a test package builds it once, in
// a sync.OnceValues.
func BuildCelos(pattern string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "celos")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/celos")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build ./cmd/celos: %v\n%s", err, out)
	}
	return bin, nil
}
