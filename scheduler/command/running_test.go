package command

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestEndLoggedOnceFailureAtWarn: a failed command is logged at WARN with
// the reason, a successful one at INFO, each once however often its status
// is read.
func TestEndLoggedOnceFailureAtWarn(t *testing.T) {
	var logs syncBuffer
	s, err := New(t.TempDir(), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Wait(context.Background()) })
	bad := newWorkflow("sh", "-c", "exit 3")
	good := newWorkflow("true")
	badID, err := s.Submit(context.Background(), bad, sid)
	if err != nil {
		t.Fatal(err)
	}
	goodID, err := s.Submit(context.Background(), good, sid)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, bad, badID)
	waitDone(t, s, good, goodID)
	waitDone(t, s, bad, badID) // read again: not logged again
	var got []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=\"command failed\"") || strings.Contains(l, "msg=\"command succeeded\"") {
			got = append(got, l[strings.Index(l, "level="):])
		}
	}
	want := []string{
		`level=WARN msg="command failed" job=` + badID + ` reason="exit 3"`,
		`level=INFO msg="command succeeded" job=` + goodID,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunningCountsLiveJobs: Running counts the jobs whose process lives,
// this process's and those an earlier server started (adopted), and not
// the ended ones.
func TestRunningCountsLiveJobs(t *testing.T) {
	dir := t.TempDir()
	first := newService(t, dir)
	w := newWorkflow("true")
	done, err := first.Submit(context.Background(), w, sid)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, first, w, done)
	long := newWorkflow("sleep", "60")
	live, err := first.Submit(context.Background(), long, sid)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := first.Running(); err != nil || n != 1 {
		t.Fatalf("Running = %d, %v; want 1", n, err)
	}
	second := newService(t, dir) // a restarted server adopts it
	if n, err := second.Running(); err != nil || n != 1 {
		t.Fatalf("after a restart: Running = %d, %v; want 1", n, err)
	}
	if err := second.Kill(context.Background(), long, live); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := second.Running(); err != nil || n != 0 {
		t.Fatalf("after the kill: Running = %d, %v; want 0", n, err)
	}
}
