package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/schema/workflow"
)

// TestHangingTargetDoesNotHoldBackOthers: two targets hear every event;
// one accepts connections and never answers. Each of its deliveries held
// one of the two workers for the whole client timeout, so the other
// target's events waited behind them (30 events, a 3-second timeout: the
// last delivery to the healthy target came after about 45 s, and a larger
// burst filled the queue and dropped them). Now a target whose attempt
// timed out or could not connect is not tried again before its retry
// time: its deliveries meanwhile wait without taking a worker, and the
// healthy target's are delivered at once.
func TestHangingTargetDoesNotHoldBackOthers(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	var got atomic.Int64
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer ok.Close()
	var res results
	s := New(Options{Logger: quiet(), OnResult: res.add, Client: &http.Client{Timeout: 3 * time.Second}})
	defer s.Close(context.Background())
	const n = 30
	start := time.Now()
	for range n {
		ev := event(hang.URL, "")
		ev.Targets = append(ev.Targets, workflow.Notification{Type: workflow.NotifyWebhook, URL: ok.URL, Events: workflow.Events})
		s.Send(ev)
	}
	// Without the hanging target they all arrive in well under a second;
	// 20 s leaves a slow machine room, and is less than half of what the
	// hanging target's timeouts cost before.
	deadline := start.Add(20 * time.Second)
	for got.Load() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := got.Load(); g < n {
		t.Fatalf("the healthy target received %d of %d events within 20 s: the hanging one holds the workers", g, n)
	}
	if d := res.get("failure dropped"); d != 0 {
		t.Errorf("%d deliveries dropped", d)
	}
}
