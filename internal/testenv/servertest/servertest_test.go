package servertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLockedBuffer: writes from many goroutines, read while they go on,
// all end up in the buffer whole (run with -race to see the lock matter).
func TestLockedBuffer(t *testing.T) {
	var b LockedBuffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				fmt.Fprintf(&b, "w%d-%03d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if len(l) != len("w0-000") {
			t.Errorf("a torn line %q", l)
		}
	}
}

// TestBuildCelos builds cmd/celos and runs the binary's version command.
func TestBuildCelos(t *testing.T) {
	bin, err := BuildCelos("celos-servertest-bin-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(filepath.Dir(bin))
	if !strings.HasPrefix(filepath.Base(filepath.Dir(bin)), "celos-servertest-bin-") {
		t.Errorf("built into %s, not a directory named after the pattern", bin)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "celos ") {
		t.Errorf("celos version: %v %q", err, out)
	}
}
