package server

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// The tests of a server whose start-up read of the state is held back:
// nothing but that read may read every workflow's state (docs/server.md,
// "After a restart").

// heldStart is a server over a real file store whose background read of
// the state at start-up reads each workflow's files and then waits, before
// installing them, until release.
type heldStart struct {
	t      *testing.T
	url    string
	db     *statedb.DB
	ids    []string
	stderr *servertest.LockedBuffer
	old    []string // the state files of old final slots (60 days old)

	mu   sync.Mutex
	gate chan struct{} // closed: background reads install what they read
}

// release lets the background reads install what they read.
func (h *heldStart) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.gate:
	default:
		close(h.gate)
	}
}

// hold holds the background reads (after a release) again.
func (h *heldStart) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate = make(chan struct{})
}

// wait is the store's BeforeInstall: it waits for the gate.
func (h *heldStart) wait(string) {
	h.mu.Lock()
	g := h.gate
	h.mu.Unlock()
	<-g
}

// coldWorkflows are the workflows of a heldStart; each has three SUCCESS
// slots in the window and an old SUCCESS slot 60 days ago.
var coldWorkflows = []string{"a", "b", "c"}

// startHeld writes the installation and starts a server on it (with the
// settings set applies), its start-up read held.
func startHeld(t *testing.T, set func(*Config)) *heldStart {
	t.Helper()
	dir := t.TempDir()
	wdir, dbDir := filepath.Join(dir, "workflows"), filepath.Join(dir, "db")
	now := time.Now().UTC().Truncate(time.Hour)
	var wfs []workflow.Workflow
	for _, id := range coldWorkflows {
		w := fixture.Hourly(id)
		w.ExternalService = fixture.Command("true")
		w.StartTime = now.Add(-90 * 24 * time.Hour)
		wfs = append(wfs, w)
	}
	fixture.WriteProject(t, wdir, "p", wfs...)
	h := &heldStart{t: t, ids: coldWorkflows, stderr: &servertest.LockedBuffer{}, gate: make(chan struct{})}
	t.Cleanup(h.release)
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	old := now.Add(-60 * 24 * time.Hour)
	for _, id := range coldWorkflows {
		for i := 1; i <= 3; i++ {
			if err := db.Put(slot.State{ID: slot.ID{Workflow: id, Time: now.Add(-time.Duration(i) * time.Hour)}, Status: slot.Success}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Put(slot.State{ID: slot.ID{Workflow: id, Time: old}, Status: slot.Success}); err != nil {
			t.Fatal(err)
		}
		h.old = append(h.old, filepath.Join(dbDir, "state", id, old.Format("2006-01-02"), old.Format("15:04:05.000Z")))
	}
	db.Close()
	for _, p := range h.old {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the old slot's file: %v", err)
		}
	}

	cfg := Config{Workflows: wdir, DB: dbDir, URLFile: filepath.Join(dir, "url"), Stderr: h.stderr, Version: "test"}
	if set != nil {
		set(&cfg)
	}
	stores := make(chan *statedb.DB, 1)
	h.url, _ = startRun(t, cfg, func(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
		db, err := statedb.OpenWith(cfg.DB, statedb.Options{BeforeInstall: h.wait})
		if err != nil {
			return nil, nil, err
		}
		stores <- db
		return newEngine(cfg, d, db)
	})
	t.Cleanup(h.release) // before startRun's stop (cleanups run last first): the server stops with its reads let go
	select {
	case h.db = <-stores:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not open its file store")
	}
	return h
}

// notRead fails the test if the state of any workflow is in memory while
// the start-up read is held: something other than that read read it.
func (h *heldStart) notRead(what string) {
	h.t.Helper()
	for _, id := range h.ids {
		if h.db.Loaded(id) {
			h.t.Fatalf("%s: workflow %s's state was read while the start-up read was held: it read every workflow itself instead of leaving them to that read", what, id)
		}
	}
}

// readEnded waits (30 s at most) until no background read runs any more.
func (h *heldStart) readEnded(what string) {
	h.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); h.db.Unread(h.ids) != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: the background read did not end within 30 s", what)
		}
	}
}

// waitLog waits (30 s at most) until the log holds one of subs and
// returns the first found.
func (h *heldStart) waitLog(subs ...string) string {
	h.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		log := h.stderr.String()
		for _, s := range subs {
			if strings.Contains(log, s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("none of %q logged within 30 s:\n%s", subs, log)
		}
	}
}

// clearCache sends POST /clear-cache, which must answer 200.
func (h *heldStart) clearCache() {
	h.t.Helper()
	resp, err := http.Post(h.url+"/clear-cache", "application/json", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("POST /clear-cache: %s", resp.Status)
	}
}

var metricLine = regexp.MustCompile(`(?m)^(celos_slots\{status="SUCCESS"\}|celos_workflows_loading) (\S+)$`)

// scrape returns celos_slots{status="SUCCESS"} and celos_workflows_loading
// ("" when absent) from GET /metrics.
func (h *heldStart) scrape() map[string]string {
	h.t.Helper()
	body := get(h.t, h.url+"/metrics")
	out := map[string]string{}
	for _, m := range metricLine.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestMetricsDuringStartRead: a /metrics scrape during the start-up read
// reads no workflow's state: celos_slots counts the workflows read so far
// (none here) and celos_workflows_loading says how many are left out;
// once the read ended, the next scrape's counts are complete (0 left out).
func TestMetricsDuringStartRead(t *testing.T) {
	h := startHeld(t, nil)
	got := h.scrape()
	h.notRead("GET /metrics")
	want := map[string]string{`celos_slots{status="SUCCESS"}`: "0", "celos_workflows_loading": "3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET /metrics during the start-up read: %v, want %v", got, want)
	}
	h.release()
	h.readEnded("after the release")
	got = h.scrape()
	want = map[string]string{`celos_slots{status="SUCCESS"}`: "9", "celos_workflows_loading": "0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET /metrics after the start-up read: %v, want %v", got, want)
	}
}

// TestPruneWaitsForStartRead: --prune-older-than prunes once the start-up
// read is done, not during it (it would read every workflow itself), and
// prunes as before then.
func TestPruneWaitsForStartRead(t *testing.T) {
	h := startHeld(t, func(c *Config) { c.PruneOlderThan = 30 * 24 * time.Hour })
	if got := h.waitLog(pruneWaitMsg, "pruned state database"); got != pruneWaitMsg {
		t.Fatalf("the state database was pruned while the start-up read was held, before any %q:\n%s", pruneWaitMsg, h.stderr.String())
	}
	h.notRead("--prune-older-than")
	for _, p := range h.old {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("pruned during the start-up read: %v", err)
		}
	}
	h.release()
	h.waitLog("pruned state database")
	if log := h.stderr.String(); !strings.Contains(log, "deleted=3") {
		t.Errorf("the prune after the start-up read did not delete the 3 old slots:\n%s", log)
	}
	for _, p := range h.old {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("old final slot not pruned after the start-up read: %v", err)
		}
	}
}

// TestClearCacheDuringStartRead: POST /clear-cache during the start-up
// read starts the read again (what was read before it is dropped): once
// it ended, every workflow's state is in memory again, none left to be
// read by the views one by one.
func TestClearCacheDuringStartRead(t *testing.T) {
	h := startHeld(t, nil)
	h.clearCache()
	h.notRead("POST /clear-cache")
	h.release()
	h.readEnded("after the release")
	for _, id := range h.ids {
		if !h.db.Loaded(id) {
			t.Errorf("workflow %s's state not read when the background read ended: POST /clear-cache during the start-up read left it to be read view by view", id)
		}
	}
	if got, want := h.scrape(), `map[celos_slots{status="SUCCESS"}:9 celos_workflows_loading:0]`; fmt.Sprint(got) != want {
		t.Errorf("GET /metrics after the read: %v, want %s", got, want)
	}
}

// TestClearCacheAfterStartRead: POST /clear-cache after the start-up read
// reads the state again in the background too, and the next scrape says
// so: the counts of before are not reported as complete while the state
// is being read again.
func TestClearCacheAfterStartRead(t *testing.T) {
	h := startHeld(t, nil)
	h.release()
	h.readEnded("the start-up read")
	want := `map[celos_slots{status="SUCCESS"}:9 celos_workflows_loading:0]`
	if got := h.scrape(); fmt.Sprint(got) != want {
		t.Fatalf("GET /metrics after the start-up read: %v, want %s", got, want)
	}
	h.hold()
	h.clearCache()
	if got, want := h.scrape(), `map[celos_slots{status="SUCCESS"}:0 celos_workflows_loading:3]`; fmt.Sprint(got) != want {
		t.Errorf("GET /metrics while the state is read again after POST /clear-cache: %v, want %s", got, want)
	}
	h.notRead("POST /clear-cache, then GET /metrics")
	h.release()
	h.readEnded("the read after POST /clear-cache")
	for _, id := range h.ids {
		if !h.db.Loaded(id) {
			t.Errorf("workflow %s's state not read again after POST /clear-cache", id)
		}
	}
	if got := h.scrape(); fmt.Sprint(got) != want {
		t.Errorf("GET /metrics once the state is read again: %v, want %s", got, want)
	}
}
