package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptT is a testscript.T that records a script's failure instead of
// failing the test that runs it (to test the script commands themselves).
type scriptT struct {
	mu     sync.Mutex
	failed bool
	log    strings.Builder
}

func (t *scriptT) Skip(args ...any) { t.Log(args...); runtime.Goexit() }
func (t *scriptT) Fatal(args ...any) {
	t.Log(args...)
	t.FailNow()
}
func (t *scriptT) Parallel() {}
func (t *scriptT) Log(args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(&t.log, args...)
}
func (t *scriptT) FailNow() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	runtime.Goexit()
}
func (t *scriptT) Verbose() bool { return false }

// Run runs f on its own goroutine, as testing does, so that FailNow ends
// only the script.
func (t *scriptT) Run(name string, f func(testscript.T)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(t)
	}()
	<-done
}

// TestWaitServerFailsWhenTheServerExited: waitserver gives up as soon as
// the background `celos server` it waits for has exited, instead of
// waiting serverWait for a URL file that will never come, and the
// server's own error is in the failure's log.
func TestWaitServerFailsWhenTheServerExited(t *testing.T) {
	dir := t.TempDir()
	script := `exec celos server --port 0 --workflows wf --db db --logs '' --jobs jobs --url-file url &server&
waitserver url
`
	if err := os.WriteFile(filepath.Join(dir, "exited.txtar"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	st := &scriptT{}
	start := time.Now()
	testscript.RunT(st, testscript.Params{Dir: dir, RequireExplicitExec: true, Cmds: scriptCmds})
	took := time.Since(start)
	if !st.failed {
		t.Fatalf("the script passed although the server cannot start (no wf directory); log:\n%s", st.log.String())
	}
	// A bound far below serverWait (2 minutes), not a timing assertion on
	// speed: the server exits at once on a missing directory.
	if took > serverWait/2 {
		t.Errorf("waitserver failed after %v: it waited for a server that had exited", took.Round(time.Second))
	}
	for _, want := range []string{"exited before it listened", "wf"} {
		if !strings.Contains(st.log.String(), want) {
			t.Errorf("the failure's log lacks %q:\n%s", want, st.log.String())
		}
	}
}
