package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recordingOutbox is the outbox's side as the sender sees it: what it was
// told of each delivery, and whether the workflow is this instance's.
type recordingOutbox struct {
	mu       sync.Mutex
	finished []string
	released []string
	calls    [][]string // the deliveries of each call of Released
	notMine  atomic.Bool
}

func (o *recordingOutbox) Finished(wf, id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = append(o.finished, wf+" "+id)
}

func (o *recordingOutbox) Released(ids ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = append(o.released, ids...)
	o.calls = append(o.calls, append([]string(nil), ids...))
}

func (o *recordingOutbox) Mine(string) bool { return !o.notMine.Load() }

func (o *recordingOutbox) lists() (finished, released []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.finished...), append([]string(nil), o.released...)
}

// TestCloseKeepsWhatItCannotDeliver: a delivery with an id from the
// outbox is posted under that id and reported finished once delivered.
// At Close, a delivery waiting for its retry (its target answered 503)
// is released to the outbox, not dropped, and Close returns at once; a
// delivery without an outbox id is dropped (counted) as before.
func TestCloseKeepsWhatItCannotDeliver(t *testing.T) {
	var seen sync.Map // delivery id → attempts
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Celos-Delivery")
		n, _ := seen.LoadOrStore(id, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var res results
	ob := &recordingOutbox{}
	s := New(Options{Logger: quiet(), OnResult: res.add, Outbox: ob, Backoff: time.Hour})
	up := event(srv.URL+"/up", "")
	up.Deliveries = []string{"up-1"}
	s.Send(up)
	waitFor(t, "the delivery to the target that is up", func() bool { f, _ := ob.lists(); return len(f) == 1 })
	if _, ok := seen.Load("up-1"); !ok {
		t.Fatal("the delivery was not posted under the outbox's id")
	}
	down := event(srv.URL+"/down", "")
	down.Deliveries = []string{"down-1"}
	s.Send(down)
	s.Send(event(srv.URL+"/down", "")) // no outbox id
	waitFor(t, "two attempts answered 503", func() bool { return res.get("failure retried") == 2 })
	start := time.Now()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Close waited %s for retries an hour away", took)
	}
	finished, released := ob.lists()
	if diff := cmp.Diff([]string{"wf up-1"}, finished); diff != "" {
		t.Errorf("finished (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"down-1"}, released); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
	if res.get("failure kept") != 1 || res.get("failure dropped") != 1 {
		t.Errorf("results %v, want one kept (the outbox's) and one dropped", res.m)
	}
	// After Close, an event is released at once (its record stays).
	late := event(srv.URL+"/up", "")
	late.Deliveries = []string{"late-1"}
	s.Send(late)
	if _, released = ob.lists(); len(released) != 2 || released[1] != "late-1" {
		t.Errorf("released %q, want late-1 last", released)
	}
}

// TestCloseDrainsWithinItsBound: deliveries queued at Close are still
// attempted; a target that never answers holds Close no longer than
// DrainTimeout, and the delivery it held is released, not lost.
func TestCloseDrainsWithinItsBound(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release) // (before hang.Close)
	var res results
	ob := &recordingOutbox{}
	s := New(Options{Logger: quiet(), OnResult: res.add, Outbox: ob, Workers: 1, DrainTimeout: time.Second,
		Client: &http.Client{Timeout: time.Minute}})
	ev := event(hang.URL, "")
	ev.Deliveries = []string{"hung-1"}
	s.Send(ev)
	ev.Deliveries = []string{"hung-2"} // queued behind it (one worker)
	s.Send(ev)
	start := time.Now()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("Close took %s with a 1 s drain bound", took)
	}
	_, released := ob.lists()
	if diff := cmp.Diff([]string{"hung-1", "hung-2"}, released); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
}

// TestNotMineIsReleasedNotAttempted: a delivery of a workflow that is no
// longer this instance's (another took it over) is released to the
// outbox without an attempt: the new owner sends it.
func TestNotMineIsReleasedNotAttempted(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	defer srv.Close()
	ob := &recordingOutbox{}
	ob.notMine.Store(true)
	s := New(Options{Logger: quiet(), Outbox: ob})
	defer s.Close(context.Background())
	ev := event(srv.URL, "")
	ev.Deliveries = []string{"theirs-1"}
	s.Send(ev)
	waitFor(t, "the release", func() bool { _, r := ob.lists(); return len(r) == 1 })
	if n := posts.Load(); n != 0 {
		t.Errorf("%d posts of a delivery that is not this instance's", n)
	}
}

// TestCloseReleasesTogether: at Close, the deliveries waiting for their
// retry are released to the outbox in one call (one write of their
// records), and so are those still queued when the drain's time is up
// (before: one call, and one synced write, each).
func TestCloseReleasesTogether(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	defer close(release) // (before srv.Close)
	var res results
	ob := &recordingOutbox{}
	s := New(Options{Logger: quiet(), OnResult: res.add, Outbox: ob, Workers: 1, Backoff: time.Hour, DrainTimeout: time.Second,
		Client: &http.Client{Timeout: time.Minute}})
	var waiting, queued []string
	for i := range 5 {
		ev := event(srv.URL+"/down", "")
		ev.Deliveries = []string{"down-" + strconv.Itoa(i)}
		waiting = append(waiting, ev.Deliveries[0])
		s.Send(ev)
	}
	waitFor(t, "five attempts answered 503", func() bool { return res.get("failure retried") == 5 })
	for i := range 4 { // the first hangs the one worker; the others stay queued
		ev := event(srv.URL+"/hang", "")
		ev.Deliveries = []string{"hang-" + strconv.Itoa(i)}
		if i > 0 {
			queued = append(queued, ev.Deliveries[0])
		}
		s.Send(ev)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ob.mu.Lock()
	calls := ob.calls
	ob.mu.Unlock()
	sort.Strings(waiting)
	for _, c := range calls {
		sort.Strings(c)
	}
	want := [][]string{waiting, {"hang-0"}, queued} // (the one in flight lets go on its own)
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls of Released (-want +got):\n%s", diff)
	}
}
