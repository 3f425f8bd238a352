package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"
)

// sleepyProject is a project whose one test case starts a job that
// records its PID in the prefix and sleeps for ten minutes.
const sleepyProject = `package p

import "celos.dev/celos"

workflows: celos.#Workflows
tests:     celos.#Tests

workflows: sleepy: {
	schedule:        celos.#Hourly
	trigger:         celos.#Always
	externalService: celos.#Command & {command: ["sh", "-c", "echo $$ > $CELOS_HDFS_PREFIX/pid.tmp && mv $CELOS_HDFS_PREFIX/pid.tmp $CELOS_HDFS_PREFIX/pid && exec sleep 600"]}
}

tests: slow: {
	sampleTimeStart: "2026-01-01T10:00:00Z"
	sampleTimeEnd:   "2026-01-01T11:00:00Z"
	outputs: [{path: "/out", files: {}}]
}
`

// TestTestInterruptCleansUp sends SIGINT to a real process running
// `celos test` (a child of the test binary, bounded in time and memory)
// while a case's job runs: the run ends with exit 1 saying it was
// interrupted, the job is killed, and nothing is left in the temporary
// directory.
func TestTestInterruptCleansUp(t *testing.T) {
	child.Run(t, 3*time.Minute, 4<<30, func() error {
		work, err := os.MkdirTemp("", "celos-interrupt-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		proj, tmp := filepath.Join(work, "proj"), filepath.Join(work, "tmp")
		for _, d := range []string{proj, tmp} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(proj, "p.cue"), []byte(sleepyProject), 0o644); err != nil {
			return err
		}
		os.Setenv("TMPDIR", tmp)
		os.Setenv("CUE_REGISTRY", "none")
		pidc := make(chan int, 1)
		go func() {
			deadline := time.Now().Add(2 * time.Minute)
			for time.Now().Before(deadline) {
				files, _ := filepath.Glob(filepath.Join(tmp, "celos-test-p-*", "fs", "slow", "pid"))
				if len(files) == 1 {
					data, _ := os.ReadFile(files[0])
					if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
						pidc <- pid
						syscall.Kill(os.Getpid(), syscall.SIGINT)
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			pidc <- 0
		}()
		var stdout, stderr bytes.Buffer
		code := run([]string{"test", proj}, &stdout, &stderr)
		pid := <-pidc
		if pid == 0 {
			return fmt.Errorf("the job never started; exit %d\n%s%s", code, stdout.String(), stderr.String())
		}
		if code != ExitFailure {
			return fmt.Errorf("exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
		}
		if !strings.Contains(stdout.String(), "--- FAIL: slow (") || !strings.Contains(stdout.String(), "    interrupted\n") ||
			!strings.Contains(stdout.String(), "(interrupted; the sandboxes were cleaned up)") {
			return fmt.Errorf("output does not say it was interrupted:\n%s", stdout.String())
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("the job (pid %d) still runs after the interrupted run: %v", pid, err)
		}
		left, err := os.ReadDir(tmp)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("left in the temporary directory: %s", left[0].Name())
		}
		return nil
	})
}
