package server

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// slowFailingService is a command service whose jobs fail between 0 and
// 1.5 s after their submission, the delay told by the job id alone (the
// submission time and a hash), so that a restarted process sees the jobs
// of the one it replaces end as they would have: the failures of a step
// spread over many steps, and a kill lands among them.
type slowFailingService struct{}

func (slowFailingService) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	return fmt.Sprintf("job-%d-%d", time.Now().UnixNano(), id.Time.Unix()), nil
}

func (slowFailingService) Status(ctx context.Context, w *workflow.Workflow, ext string) (external.Status, error) {
	parts := strings.Split(ext, "-")
	if len(parts) != 3 {
		return external.Status{}, fmt.Errorf("not a job of this test: %q", ext)
	}
	at, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return external.Status{}, err
	}
	h := fnv.New32a()
	h.Write([]byte(ext))
	end := time.Unix(0, at).Add(time.Duration(h.Sum32()%1500) * time.Millisecond)
	return external.Status{Running: time.Now().Before(end), Detail: "exit 1"}, nil
}

func (slowFailingService) Kill(ctx context.Context, w *workflow.Workflow, ext string) error {
	return nil
}

func slowFailingOpener(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
	d.services = map[string]external.Service{workflow.ServiceCommand: slowFailingService{}}
	return openEngine(cfg, d)
}

// killLoopReceiver is a webhook receiver with three targets (/a, /b,
// /c): it answers 503 to the first attempt of every delivery (so each
// one waits for its retry, in the sender's memory, for a second) and 200
// to the others, after 0–50 ms (so that some are in flight). It counts
// what it accepted by delivery id and by target, workflow and slot.
type killLoopReceiver struct {
	*httptest.Server
	mu sync.Mutex
	// byID: deliveries accepted per id; bySlot: the ids accepted per
	// "target workflow slot".
	byID   map[string]int
	bySlot map[string]map[string]bool
}

func newKillLoopReceiver(t *testing.T) *killLoopReceiver {
	h := &killLoopReceiver{byID: make(map[string]int), bySlot: make(map[string]map[string]bool)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Workflow string `json:"workflow"`
			Slot     string `json:"slot"`
			Delivery string `json:"delivery"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		if r.Header.Get("X-Celos-Attempt") == "1" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.byID[b.Delivery]++
		k := r.URL.Path + " " + b.Workflow + " " + b.Slot
		if h.bySlot[k] == nil {
			h.bySlot[k] = make(map[string]bool)
		}
		h.bySlot[k][b.Delivery] = true
	}))
	t.Cleanup(h.Close)
	return h
}

// killLoopProject writes a workflow with the slots of the last 12 hours,
// all submitted at once (concurrency 12), each failing, with three
// webhook targets for failures.
func killLoopProject(t *testing.T, dir, url string) string {
	t.Helper()
	wdir := filepath.Join(dir, "workflows")
	if err := os.MkdirAll(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var notify []workflow.Notification
	for _, p := range []string{"/a", "/b", "/c"} {
		notify = append(notify, workflow.Notification{Type: workflow.NotifyWebhook, URL: url + p, Events: []string{workflow.EventFailure}})
	}
	w := workflow.Workflow{ID: "etl", Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger: workflow.Trigger{Type: workflow.TriggerAlways}, SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 12},
		ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"false"}},
		StartTime:       time.Now().UTC().Truncate(time.Hour).Add(-11 * time.Hour), WaitTimeoutSeconds: workflow.NeverTimeout,
		Notify: notify}
	fixture.WriteProject(t, wdir, "p", w)
	return wdir
}

const killLoopEnv = "CELOS_TEST_OUTBOX_KILL_LOOP"

// runKillLoopChild is the child's body: a plain server of the parent's
// set-up (killParams: Workflows, DB, Jobs, URLFile).
func runKillLoopChild() error {
	var p killParams
	if err := json.Unmarshal([]byte(os.Getenv(killLoopEnv)), &p); err != nil {
		return err
	}
	// (On PostgreSQL each child is a new instance, which takes the
	// killed one's leases over when they expire.)
	cfg := Config{Workflows: p.Workflows, DB: p.DB, Jobs: p.Jobs, URLFile: p.URLFile, AutoSchedule: 20 * time.Millisecond,
		InstanceID: filepath.Base(p.URLFile), Lease: time.Second, Stderr: io.Discard, Version: "test"}
	return run(context.Background(), cfg, slowFailingOpener)
}

// TestOutboxRandomKills: a real server process whose 12 slots fail at
// random times, each failure for three webhook targets whose first
// attempt is refused, is killed with SIGKILL at a random moment, again
// and again (20 times), each time started anew on the same state
// database (the file store; PostgreSQL, where each is a new instance that
// takes the killed one's leases over); then a last server runs until every slot is FAILURE and the outbox is
// empty. Every failure reached every target, under one delivery id per
// slot and target (a receiver deduplicates on it). Deliveries of the
// same id more than once are allowed (at least once), and logged.
func TestOutboxRandomKills(t *testing.T) {
	for _, st := range outboxStores {
		t.Run(st.name, func(t *testing.T) {
			if child.Is(t) {
				child.Start(t, 4<<30, runKillLoopChild)
				return
			}
			if testing.Short() {
				t.Skip("20 processes killed: not with -short")
			}
			outboxRandomKills(t, st.db)
		})
	}
}

func outboxRandomKills(t *testing.T, db func(t *testing.T, dir string) string) {
	dir := t.TempDir()
	hook := newKillLoopReceiver(t)
	p := killParams{Workflows: killLoopProject(t, dir, hook.URL), DB: db(t, dir), Jobs: filepath.Join(dir, "jobs")}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	t.Logf("seed %d", seed)
	for i := range 20 {
		p.URLFile = filepath.Join(dir, fmt.Sprintf("url%d", i))
		raw, _ := json.Marshal(p)
		t.Setenv(killLoopEnv, string(raw))
		proc := child.Start(t, 4<<30, nil)
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(p.URLFile); err == nil && len(b) > 0 {
				break
			}
			if exited, err := proc.Exited(); exited {
				t.Fatalf("round %d: the server ended before it served (%v):\n%s", i, err, proc.Output())
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the server did not serve within 2 minutes:\n%s", i, proc.Output())
			}
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond) // the kill point, at random
		proc.Kill()
	}
	hook.mu.Lock()
	t.Logf("during the kills: %d deliveries accepted under %d ids", sum(hook.byID), len(hook.byID))
	hook.mu.Unlock()
	logs := &servertest.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last server's log:\n%s", logs)
		}
	})
	cfg := Config{Workflows: p.Workflows, DB: p.DB, Jobs: p.Jobs, AutoSchedule: 20 * time.Millisecond,
		InstanceID: "last", Lease: time.Second, URLFile: filepath.Join(dir, "url-last"), Stderr: logs, Version: "test"}
	url, stop := startRun(t, cfg, slowFailingOpener)
	start := time.Now().UTC().Truncate(time.Hour).Add(-11 * time.Hour)
	var failed []string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var ws api.WorkflowSlots
		if err := json.Unmarshal([]byte(get(t, url+"/workflow-slots?id=etl&start="+slot.FormatTime(start))), &ws); err != nil {
			t.Fatal(err)
		}
		failed = failed[:0]
		for _, s := range ws.Slots {
			if s.Status == slot.Failure {
				failed = append(failed, s.Time)
			}
		}
		if len(failed) == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every slot FAILURE within 2 minutes: %+v", ws.Slots)
		}
	}
	waitOutboxEmpty(t, url)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	dups := 0
	for id, n := range hook.byID {
		if n > 1 {
			dups++
			t.Logf("delivery %s accepted %d times", id, n)
		}
	}
	for _, s := range failed {
		for _, target := range []string{"/a", "/b", "/c"} {
			ids := hook.bySlot[target+" etl "+s]
			if len(ids) != 1 {
				t.Errorf("the failure of %s reached %s under %d delivery ids, want 1: %v", s, target, len(ids), ids)
			}
		}
	}
	t.Logf("%d deliveries accepted under %d ids, %d ids more than once", sum(hook.byID), len(hook.byID), dups)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
