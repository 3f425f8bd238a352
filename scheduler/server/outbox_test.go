package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// hookReceiver is a real webhook target that answers 503 while down and
// records the delivery ids of the attempts it saw, and of those it
// accepted.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	down     bool
	tried    []string // X-Celos-Delivery of every attempt
	accepted []string // of the attempts answered 200
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{down: true}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Celos-Delivery")
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tried = append(h.tried, id)
		if h.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.accepted = append(h.accepted, id)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) setDown(down bool) {
	h.mu.Lock()
	h.down = down
	h.mu.Unlock()
}

// wait polls (60 s at most) until ok holds of the ids tried and accepted.
func (h *hookReceiver) wait(t *testing.T, what string, ok func(tried, accepted []string) bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h.mu.Lock()
		tried, accepted := append([]string(nil), h.tried...), append([]string(nil), h.accepted...)
		h.mu.Unlock()
		if ok(tried, accepted) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s; attempts %q, accepted %q", what, tried, accepted)
		}
	}
}

func (h *hookReceiver) firstTried() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tried[0]
}

// failingProject writes a workflow whose one slot (this hour's) fails at
// once, with a webhook target for failures at url.
func failingProject(t *testing.T, dir, url string) string {
	t.Helper()
	wdir := filepath.Join(dir, "workflows")
	if err := os.MkdirAll(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := workflow.Workflow{ID: "etl", Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger: workflow.Trigger{Type: workflow.TriggerAlways}, SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
		ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"false"}},
		StartTime:       time.Now().UTC().Truncate(time.Hour), WaitTimeoutSeconds: workflow.NeverTimeout,
		Notify: []workflow.Notification{{Type: workflow.NotifyWebhook, URL: url + "/hook", Events: []string{workflow.EventFailure}}}}
	fixture.WriteProject(t, wdir, "p", w)
	return wdir
}

// outboxStores are the state stores the outbox tests run on: the file
// store in a temporary directory, and a new database of the shared
// PostgreSQL of the test run.
var outboxStores = []struct {
	name string
	db   func(t *testing.T, dir string) string
}{
	{"file", func(t *testing.T, dir string) string { return filepath.Join(dir, "db") }},
	{"postgres", func(t *testing.T, dir string) string { return pgtest.Shared(t).CreateDB(t) }},
}

// failingOpener is openEngine with a command service whose jobs fail.
func failingOpener(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
	d.services = map[string]external.Service{workflow.ServiceCommand: &failingService{}}
	return openEngine(cfg, d)
}

// TestFailureNotificationSurvivesAGracefulStop: a slot fails while its
// webhook target is down (503); the server is stopped as SIGTERM stops
// it while the delivery waits for its retry; the target comes up and the
// server starts again on the same state database: the failure arrives,
// with the delivery id of the first attempt. (Before, the sender kept its
// deliveries in memory only: the delivery was dropped at the stop, and
// the slot, already FAILURE, never produced the event again.)
func TestFailureNotificationSurvivesAGracefulStop(t *testing.T) {
	for _, st := range outboxStores {
		t.Run(st.name, func(t *testing.T) {
			dir := t.TempDir()
			hook := newHookReceiver(t)
			logs := &servertest.LockedBuffer{}
			cfg := Config{Workflows: failingProject(t, dir, hook.URL), DB: st.db(t, dir), AutoSchedule: 20 * time.Millisecond,
				Jobs: filepath.Join(dir, "jobs"), URLFile: filepath.Join(dir, "url"), Stderr: logs, Version: "test"}
			_, stop := startRun(t, cfg, failingOpener)
			hook.wait(t, "a first attempt of the failure", func(tried, _ []string) bool { return len(tried) > 0 })
			id := hook.firstTried()
			if err := stop(); err != nil {
				t.Fatalf("run: %v", err)
			}
			hook.setDown(false)
			os.Remove(cfg.URLFile)
			startRun(t, cfg, failingOpener)
			hook.wait(t, "the failure delivered after the restart", acceptedOnce(id))
		})
	}
}

// acceptedOnce: the receiver accepted delivery id, and no other.
func acceptedOnce(id string) func(tried, accepted []string) bool {
	return func(_, accepted []string) bool {
		for _, a := range accepted {
			if a != id {
				return false
			}
		}
		return len(accepted) > 0
	}
}

// killParamsEnv passes the set-up of a kill test to its child process.
const killParamsEnv = "CELOS_TEST_OUTBOX_KILL"

type killParams struct {
	// Config's fields the child needs.
	Workflows, DB, Jobs, URLFile, Marker string
	// Before: the child stops before the FAILURE state is written, else
	// just after it.
	Before bool
}

// killPointStore is the child's store: a step that writes a FAILURE
// state writes the marker file and blocks for ever, before or after the
// write (killParams.Before), for the parent to kill the process there.
type killPointStore struct {
	stateStore
	marker string
	before bool
}

func (k *killPointStore) PutStates(sts []slot.State) map[slot.ID]error {
	fails := false
	for _, st := range sts {
		fails = fails || st.Status == slot.Failure
	}
	if fails && k.before {
		os.WriteFile(k.marker, []byte("before"), 0o644)
		select {}
	}
	r := k.stateStore.PutStates(sts)
	if fails {
		os.WriteFile(k.marker, []byte("after"), 0o644)
		select {}
	}
	return r
}

// killChild runs the server of p in a child process until its step
// reaches the kill point, and kills it there with SIGKILL.
func killChild(t *testing.T, p killParams) {
	t.Helper()
	raw, _ := json.Marshal(p)
	t.Setenv(killParamsEnv, string(raw))
	proc := child.Start(t, 4<<30, nil)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(p.Marker); err == nil {
			break
		}
		if exited, err := proc.Exited(); exited {
			t.Fatalf("the server ended before the kill point (%v):\n%s", err, proc.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not reach the kill point within 2 minutes:\n%s", proc.Output())
		}
	}
	proc.Kill()
}

// runKillChild is the child's body: the server of the parent's set-up,
// over a killPointStore.
func runKillChild() error {
	var p killParams
	if err := json.Unmarshal([]byte(os.Getenv(killParamsEnv)), &p); err != nil {
		return err
	}
	cfg := Config{Workflows: p.Workflows, DB: p.DB, Jobs: p.Jobs, URLFile: p.URLFile, AutoSchedule: 20 * time.Millisecond,
		InstanceID: "killed", Lease: time.Second, Stderr: os.Stderr, Version: "test"}
	open := func(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
		d.services = map[string]external.Service{workflow.ServiceCommand: &failingService{}}
		db, err := openStore(cfg.DB, nil)
		if err != nil {
			return nil, nil, err
		}
		return newEngine(cfg, d, &killPointStore{stateStore: db, marker: p.Marker, before: p.Before})
	}
	return run(context.Background(), cfg, open)
}

// TestFailureNotificationSurvivesAKill9: a real server process is killed
// with SIGKILL while its step writes a slot's FAILURE — just after the
// write, before the sender saw the event, or just before it — and starts
// again on the same state database, its webhook target up. After the
// write: the failure arrives (before, nothing kept the event, and the
// slot, already FAILURE, never produced it again). Before the write: the
// restarted server decides the failure again and it arrives once, the
// record of the event that was never recorded being removed, not sent.
// Either way the outbox is empty once the failure is delivered.
func TestFailureNotificationSurvivesAKill9(t *testing.T) {
	for _, st := range outboxStores {
		for _, before := range []bool{false, true} {
			t.Run(st.name+"/"+map[bool]string{false: "after_the_write", true: "before_the_write"}[before], func(t *testing.T) {
				if child.Is(t) {
					child.Start(t, 4<<30, runKillChild)
					return
				}
				dir := t.TempDir()
				hook := newHookReceiver(t)
				hook.setDown(false)
				p := killParams{Workflows: failingProject(t, dir, hook.URL), DB: st.db(t, dir), Jobs: filepath.Join(dir, "jobs"),
					URLFile: filepath.Join(dir, "url"), Marker: filepath.Join(dir, "killed-here"), Before: before}
				killChild(t, p)
				logs := &servertest.LockedBuffer{}
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("the restarted server's log:\n%s", logs)
					}
				})
				// (On PostgreSQL: another instance, which takes the killed
				// one's lease over when it expires.)
				cfg := Config{Workflows: p.Workflows, DB: p.DB, Jobs: p.Jobs, AutoSchedule: 20 * time.Millisecond,
					InstanceID: "restarted", Lease: time.Second, URLFile: filepath.Join(dir, "url2"), Stderr: logs, Version: "test"}
				url, stop := startRun(t, cfg, failingOpener)
				hook.wait(t, "the failure delivered after the restart", func(_, accepted []string) bool { return len(accepted) > 0 })
				waitOutboxEmpty(t, url)
				if err := stop(); err != nil {
					t.Fatalf("run: %v", err)
				}
				hook.mu.Lock()
				defer hook.mu.Unlock()
				if len(hook.accepted) != 1 {
					t.Errorf("deliveries %q, want one", hook.accepted)
				}
			})
		}
	}
}

// waitOutboxEmpty polls (60 s at most) the register API of the server at
// url until the outbox bucket has no key.
func waitOutboxEmpty(t *testing.T, url string) {
	t.Helper()
	var keys api.RegisterKeys
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := json.Unmarshal([]byte(get(t, url+"/list-register-keys?bucket=celos-outbox")), &keys); err != nil {
			t.Fatal(err)
		}
		if len(keys.Keys) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outbox still holds %q after 60 s", keys.Keys)
		}
	}
}
