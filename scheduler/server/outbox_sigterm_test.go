package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/servertest"
)

// hangingReceiver is a webhook target that, while hanging, accepts each
// request and never answers it (until the client gives up), and answers
// 200 otherwise; it records the delivery ids it saw hanging and those it
// accepted.
type hangingReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	hang     bool
	hung     map[string]bool
	accepted map[string]int
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	h := &hangingReceiver{hang: true, hung: make(map[string]bool), accepted: make(map[string]int)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Celos-Delivery")
		h.mu.Lock()
		hang := h.hang
		if hang {
			h.hung[id] = true
		} else {
			h.accepted[id]++
		}
		h.mu.Unlock()
		if hang {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(h.Close)
	return h
}

const sigtermEnv = "CELOS_TEST_OUTBOX_SIGTERM"

// runSigtermChild is the child's body: the server of the parent's set-up
// under the signal handling of celos server (a first SIGTERM stops it
// gracefully, a second kills it), its pid written beside its URL file.
func runSigtermChild() error {
	var p killParams
	if err := json.Unmarshal([]byte(os.Getenv(sigtermEnv)), &p); err != nil {
		return err
	}
	if err := os.WriteFile(p.Marker, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	cfg := Config{Workflows: p.Workflows, DB: p.DB, Jobs: p.Jobs, URLFile: p.URLFile, AutoSchedule: 20 * time.Millisecond,
		Stderr: os.Stderr, Version: "test"}
	return run(ctx, cfg, slowFailingOpener)
}

// TestSigtermWhileTheTargetHangs: a real server process whose webhook
// target accepts connections and never answers (36 deliveries: 12
// failures, 3 targets on it) gets SIGTERM while its attempts hang. It
// exits, cleanly, within the drain's bound (5 s) and the step's, not
// after the client's timeouts of every delivery; a second SIGTERM right
// after the first kills it at once (as celos server does). Either way,
// after a restart, the target answering, every failure reaches every
// target, and each id the hanging target saw arrives under the same id.
func TestSigtermWhileTheTargetHangs(t *testing.T) {
	for _, twice := range []bool{false, true} {
		t.Run(map[bool]string{false: "once", true: "twice"}[twice], func(t *testing.T) {
			if child.Is(t) {
				child.Start(t, 4<<30, runSigtermChild)
				return
			}
			sigtermWhileTheTargetHangs(t, twice)
		})
	}
}

func sigtermWhileTheTargetHangs(t *testing.T, twice bool) {
	dir := t.TempDir()
	hook := newHangingReceiver(t)
	p := killParams{Workflows: killLoopProject(t, dir, hook.URL), DB: filepath.Join(dir, "db"), Jobs: filepath.Join(dir, "jobs"),
		URLFile: filepath.Join(dir, "url"), Marker: filepath.Join(dir, "pid")}
	raw, _ := json.Marshal(p)
	t.Setenv(sigtermEnv, string(raw))
	proc := child.Start(t, 4<<30, nil)
	pid := 0
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		hook.mu.Lock()
		n := len(hook.hung)
		hook.mu.Unlock()
		b, _ := os.ReadFile(p.Marker)
		pid, _ = strconv.Atoi(string(b))
		if n >= 2 && pid > 0 { // both workers hang
			break
		}
		if exited, err := proc.Exited(); exited {
			t.Fatalf("the server ended (%v):\n%s", err, proc.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two hanging attempts within 2 minutes:\n%s", proc.Output())
		}
	}
	time.Sleep(1500 * time.Millisecond) // (every slot has failed: the queue holds the rest)
	sent := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if twice {
		time.Sleep(100 * time.Millisecond) // (the first one seen)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		exited, err := proc.Exited()
		if exited {
			if !twice && (err != nil || !strings.Contains(proc.Output(), "child: body passed")) {
				t.Fatalf("the server did not stop cleanly (%v):\n%s", err, proc.Output())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still runs 60 s after SIGTERM:\n%s", proc.Output())
		}
	}
	t.Logf("stopped %v after SIGTERM", time.Since(sent).Round(10*time.Millisecond))
	hook.mu.Lock()
	hook.hang = false
	hung := len(hook.hung)
	hook.mu.Unlock()
	logs := &servertest.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the restarted server's log:\n%s", logs)
		}
	})
	cfg := Config{Workflows: p.Workflows, DB: p.DB, Jobs: p.Jobs, AutoSchedule: 20 * time.Millisecond,
		URLFile: filepath.Join(dir, "url2"), Stderr: logs, Version: "test"}
	url, stop := startRun(t, cfg, slowFailingOpener)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		hook.mu.Lock()
		n := len(hook.accepted)
		hook.mu.Unlock()
		if n >= 36 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries arrived after the restart within 60 s, want 36", n)
		}
	}
	waitOutboxEmpty(t, url)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	for id := range hook.hung {
		if hook.accepted[id] == 0 {
			t.Errorf("delivery %s, attempted while the target hung, never arrived", id)
		}
	}
	if len(hook.accepted) != 36 {
		t.Errorf("%d deliveries arrived, want 36 (12 failures, 3 targets)", len(hook.accepted))
	}
	t.Logf("%d ids attempted while the target hung, %d arrived after the restart", hung, len(hook.accepted))
}
