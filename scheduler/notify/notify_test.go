package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// results counts what OnResult heard.
type results struct {
	mu sync.Mutex
	m  map[string]int
}

func (r *results) add(event, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]int)
	}
	r.m[event+" "+result]++
}

func (r *results) get(k string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[k]
}

// waitFor polls cond with a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func event(url, secret string) scheduler.Event {
	return scheduler.Event{Kind: workflow.EventFailure, Workflow: "wf", Slot: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC),
		Status: slot.Failure, ExternalID: "job-1", RetryCount: 2, At: time.Date(2026, 11, 24, 10, 5, 0, 0, time.UTC), Detail: "exit 3",
		Targets: []workflow.Notification{{Type: workflow.NotifyWebhook, URL: url, SecretFile: secret, Events: workflow.Events}}}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestDeliverSignedBody(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "hook.secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type got struct {
		body []byte
		hdr  http.Header
	}
	ch := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- got{b, r.Header.Clone()}
	}))
	defer srv.Close()
	var res results
	s := New(Options{Logger: quiet(), OnResult: res.add})
	defer s.Close(context.Background())
	s.Send(event(srv.URL+"/hook", secret))
	var g got
	select {
	case g = <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery")
	}
	var b Body
	if err := json.Unmarshal(g.body, &b); err != nil {
		t.Fatal(err)
	}
	want := Body{Event: "failure", Workflow: "wf", Slot: "2026-11-24T10:00:00.000Z", SlotID: "wf@2026-11-24T10:00:00.000Z",
		Status: "FAILURE", ExternalID: "job-1", RetryCount: 2, At: "2026-11-24T10:05:00.000Z", Detail: "exit 3", Delivery: b.Delivery}
	if d := cmp.Diff(want, b); d != "" || len(b.Delivery) != 24 {
		t.Errorf("body (-want +got):\n%s", d)
	}
	if sig := g.hdr.Get("X-Celos-Signature"); sig != Sign([]byte("s3cret"), g.body) || !strings.HasPrefix(sig, "sha256=") {
		t.Errorf("signature %q does not verify with the secret", sig)
	}
	for h, v := range map[string]string{"Content-Type": "application/json", "X-Celos-Event": "failure", "X-Celos-Delivery": b.Delivery, "X-Celos-Attempt": "1"} {
		if g.hdr.Get(h) != v {
			t.Errorf("header %s = %q, want %q", h, g.hdr.Get(h), v)
		}
	}
	waitFor(t, "the delivered result", func() bool { return res.get("failure delivered") == 1 })
}

func TestRetryAfter500ThenDelivered(t *testing.T) {
	var mu sync.Mutex
	var attempts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, r.Header.Get("X-Celos-Attempt")+" "+r.Header.Get("X-Celos-Delivery"))
		if len(attempts) < 3 {
			http.Error(w, "busy", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	var res results
	s := New(Options{Logger: quiet(), OnResult: res.add, Backoff: 10 * time.Millisecond})
	defer s.Close(context.Background())
	s.Send(event(srv.URL, ""))
	waitFor(t, "delivery after two 500s", func() bool { return res.get("failure delivered") == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 3 || res.get("failure retried") != 2 {
		t.Fatalf("attempts %v, retried %d", attempts, res.get("failure retried"))
	}
	id := strings.Fields(attempts[0])[1]
	for i, a := range attempts {
		if a != strings.Join([]string{string(rune('1' + i)), id}, " ") {
			t.Errorf("attempt %d: %q (the delivery id must repeat, the attempt count)", i, a)
		}
	}
}

func TestTargetDownFailsAfterAttempts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/hook?token=abc"
	ln.Close() // nothing listens: connection refused
	var res results
	var logs strings.Builder
	var lmu sync.Mutex
	s := New(Options{Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		lmu.Lock()
		defer lmu.Unlock()
		return logs.Write(p)
	}), nil)), OnResult: res.add, Backoff: 5 * time.Millisecond, MaxAttempts: 3})
	defer s.Close(context.Background())
	s.Send(event(url, ""))
	waitFor(t, "the failed result", func() bool { return res.get("failure failed") == 1 })
	if res.get("failure retried") != 2 || res.get("failure delivered") != 0 {
		t.Errorf("results %v", res.m)
	}
	lmu.Lock()
	defer lmu.Unlock()
	if !strings.Contains(logs.String(), "notification failed") || strings.Contains(logs.String(), "token=abc") {
		t.Errorf("log does not say it failed, or shows the URL's query:\n%s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestSlowTargetIsAFailedAttempt(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	var res results
	s := New(Options{Logger: quiet(), OnResult: res.add, Client: &http.Client{Timeout: 100 * time.Millisecond}, Backoff: 5 * time.Millisecond, MaxAttempts: 2})
	defer s.Close(context.Background())
	s.Send(event(srv.URL, ""))
	waitFor(t, "the slow target to fail", func() bool { return res.get("failure failed") == 1 })
	if res.get("failure retried") != 1 {
		t.Errorf("results %v", res.m)
	}
}

func TestClientErrorIsNotRetried(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	var res results
	s := New(Options{Logger: quiet(), OnResult: res.add, Backoff: time.Millisecond})
	defer s.Close(context.Background())
	s.Send(event(srv.URL, ""))
	waitFor(t, "the failed result", func() bool { return res.get("failure failed") == 1 })
	mu.Lock()
	defer mu.Unlock()
	if n != 1 {
		t.Errorf("%d attempts after a 403, want 1", n)
	}
}

func TestUnreadableSecretFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("posted without its signature") }))
	defer srv.Close()
	var res results
	s := New(Options{Logger: quiet(), OnResult: res.add})
	defer s.Close(context.Background())
	s.Send(event(srv.URL, filepath.Join(t.TempDir(), "missing")))
	waitFor(t, "the failed result", func() bool { return res.get("failure failed") == 1 })
}

// Send never blocks: with the only worker stuck on a target that does not
// answer and a queue of one, further events are dropped and counted.
func TestSendNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	var res results
	s := New(Options{Logger: quiet(), OnResult: res.add, Workers: 1, QueueSize: 1, Client: &http.Client{}})
	done := make(chan struct{})
	go func() {
		for range 50 {
			s.Send(event(srv.URL, ""))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Send blocked")
	}
	waitFor(t, "drops", func() bool { return res.get("failure dropped") >= 48 })
	close(release)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
