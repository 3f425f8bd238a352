package celosjs

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFilesThatAreNotFiles: a workflow or defaults file that is a named
// pipe, a symbolic link to a device, or a file larger than MaxFileSize is
// an error naming it, at once; the other files still convert. Before, a
// FIFO made import-js wait for ever and /dev/zero was read until memory
// ran out.
func TestFilesThatAreNotFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fifo.js", "d/fifo.js"} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/dev/zero", "zero.js"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("big.js", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate("big.js", MaxFileSize+1); err != nil {
		t.Fatal(err)
	}
	good := `celos.defineWorkflow({id: "good", schedule: celos.hourlySchedule(), schedulingStrategy: celos.serialSchedulingStrategy(),
 trigger: celos.alwaysTrigger(), externalService: celos.oozieExternalService({})});`
	if err := os.WriteFile("good.js", []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("imports.js", []byte(`celos.importDefaults("fifo");`), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan *Result, 1)
	go func() {
		done <- Evaluate([]string{"fifo.js", "zero.js", "big.js", "imports.js", "good.js"}, Options{DefaultsDir: "d", Timeout: 5 * time.Second})
	}()
	var res *Result
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Evaluate did not return within 60s")
	}
	want := []string{
		"fifo.js: read workflow file: not a regular file (named pipe)",
		"zero.js: read workflow file: not a regular file (symbolic link to a character device)",
		"big.js: read workflow file: larger than 16 MiB",
		`imports.js:1:21: celos.importDefaults("fifo"): d/fifo.js: not a regular file (named pipe)`,
	}
	if d := cmp.Diff(want, strs(res.Problems)); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	if n := len(res.Workflows()); n != 1 {
		t.Errorf("%d workflows converted, want 1 (good.js)", n)
	}
}
