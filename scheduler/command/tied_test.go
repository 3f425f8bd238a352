package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTied returns a tied Service that is released at the end of the test.
func newTied(t *testing.T) *Service {
	t.Helper()
	opts := quiet
	opts.Tied = true
	s, err := New(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.Release(ctx)
	})
	return s
}

// detachingJob is a job that starts a background child, one with its
// environment cleared (both stay in its process group), one in a session
// of its own and one that also cleared its environment and was
// double-forked (those two write their PIDs themselves once detached),
// writes their PIDs to pids, then "done", and runs for ever (forever) or
// exits.
func detachingJob(pids string, forever bool) []string {
	end := "exit 0"
	if forever {
		end = "exec sleep 4300"
	}
	return []string{"sh", "-c", `
		sleep 4301 & echo $! >> ` + pids + `
		env -i sleep 4303 & echo $! >> ` + pids + `
		setsid sh -c 'echo $$ >> ` + pids + `; exec sleep 4302' &
		(setsid env -i sh -c "echo \$\$ >> ` + pids + `; exec sleep 4304" &)
		while [ $(wc -l < ` + pids + `) -lt 4 ]; do sleep 0.01; done
		echo done >> ` + pids + `
		` + end}
}

// readPIDs waits for the job to have written its PIDs, and kills them at
// the end of the test.
func readPIDs(t *testing.T, file string) []int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(file)
		if f := strings.Fields(string(data)); len(f) > 0 && f[len(f)-1] == "done" {
			var pids []int
			for _, s := range f[:len(f)-1] {
				pid, err := strconv.Atoi(s)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job wrote no PIDs in %s", file)
		}
	}
}

func running(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if f := procStatFields(pid); len(f) > 0 && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestTiedReleaseKillsWhatJobsLeft: a tied job's command ended, leaving
// processes detached in every way; its supervisor stays, they run until
// Release, which kills them all (and a running job's command and what it
// started), counts them and waits for the supervisors.
func TestTiedReleaseKillsWhatJobsLeft(t *testing.T) {
	s := newTied(t)
	dir := t.TempDir()
	left, busy := filepath.Join(dir, "left"), filepath.Join(dir, "busy")
	w := newWorkflow(detachingJob(left, false)...)
	ext, err := s.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	leftPIDs := readPIDs(t, left)
	if st := waitDone(t, s, w, ext); !st.Success {
		t.Fatalf("status %+v", st)
	}
	w2 := newWorkflow(detachingJob(busy, true)...)
	ext2, err := s.Submit(context.Background(), w2, sid)
	if err != nil {
		t.Fatal(err)
	}
	busyPIDs := readPIDs(t, busy)
	if diff := cmp.Diff(leftPIDs, running(leftPIDs)); diff != "" {
		t.Fatalf("what the ended job left stopped before Release (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := s.Release(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The running job's group (its command, sleep 4301 and 4303) is
	// killed as the job; the rest of both jobs are counted.
	if n != 4+2 {
		l1, _ := s.ReadLog(ext, 0)
		l2, _ := s.ReadLog(ext2, 0)
		t.Errorf("Release killed %d processes the jobs left, want 6; logs:\n%s\n%s", n, l1, l2)
	}
	if got := running(append(leftPIDs, busyPIDs...)); len(got) > 0 {
		t.Errorf("processes %v still run after Release", got)
	}
	if st := waitDone(t, s, w2, ext2); !st.Killed {
		t.Errorf("the running job: %+v, want killed", st)
	}
	if _, err := s.Submit(context.Background(), w, sid); !errors.Is(err, ErrReleased) {
		t.Errorf("Submit after Release: %v, want %v", err, ErrReleased)
	}
}

// TestTiedSupervisorLeavesWithWhatItWaitedFor: the supervisor of a tied
// job whose leftovers end on their own exits then, without Release.
func TestTiedSupervisorLeavesWithWhatItWaitedFor(t *testing.T) {
	s := newTied(t)
	w := newWorkflow("sh", "-c", `(setsid env -i sleep 0.5 &)`)
	if _, err := s.Submit(context.Background(), w, sid); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("the supervisor did not exit once what its job left ended: %v", err)
	}
}
