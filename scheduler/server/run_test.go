package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// failingService accepts every job and reports it failed.
type failingService struct {
	mu sync.Mutex
	n  int
}

func (f *failingService) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return fmt.Sprintf("job-%d", f.n), nil
}
func (f *failingService) Status(ctx context.Context, w *workflow.Workflow, ext string) (external.Status, error) {
	return external.Status{Detail: "exit 1"}, nil
}
func (f *failingService) Kill(ctx context.Context, w *workflow.Workflow, ext string) error {
	return nil
}

// TestServerPoolsMetricsAndWebhooks runs the server with a pools file and
// a workflow that fails, whose webhook is a real HTTP server: the webhook
// receives the failure, /metrics shows the pool and the delivery, and a
// workflow naming an undefined pool is a problem.
func TestServerPoolsMetricsAndWebhooks(t *testing.T) {
	dir := t.TempDir()
	hooks := make(chan []byte, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- b
	}))
	defer hook.Close()
	wdir := filepath.Join(dir, "workflows")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC().Add(-90 * time.Minute).Truncate(time.Hour)
	wf := func(id, pool string) workflow.Workflow {
		return workflow.Workflow{ID: id, Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
			Trigger: workflow.Trigger{Type: workflow.TriggerAlways}, SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
			ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"false"}},
			StartTime:       start, WaitTimeoutSeconds: workflow.NeverTimeout, Pool: pool, SLA: &workflow.SLA{SuccessWithinSeconds: 60},
			Notify: []workflow.Notification{{Type: workflow.NotifyWebhook, URL: hook.URL + "/celos", Events: []string{workflow.EventFailure}}}}
	}
	// fast has a slot every second from two seconds after the start, each
	// missing its SLA of a second: counted (its deadline is after the start).
	fast := wf("fast", "")
	fast.Schedule.Cron, fast.Notify = "* * * * * ?", nil
	fast.StartTime = time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	fast.SLA = &workflow.SLA{SuccessWithinSeconds: 1}
	p := &workflow.Project{Format: workflow.FormatVersion, Project: "p", Workflows: []workflow.Workflow{wf("etl-job", "etl"), wf("lost", "nope"), fast}}
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wdir, "p.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	pools := filepath.Join(dir, "pools.json")
	if err := os.WriteFile(pools, []byte(`{"pools": {"etl": {"limit": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workflows: wdir, DB: filepath.Join(dir, "db"), Logs: filepath.Join(dir, "logs"), Pools: pools,
		AutoSchedule: 20 * time.Millisecond, URLFile: filepath.Join(dir, "url"), Stderr: io.Discard, Version: "test"}
	svc := &failingService{}
	url, _ := startRun(t, cfg, func(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
		d.services = map[string]external.Service{workflow.ServiceCommand: svc}
		return openEngine(cfg, d)
	})

	var body map[string]any
	select {
	case b := <-hooks:
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no webhook delivery")
	}
	if body["event"] != "failure" || body["workflow"] != "etl-job" || body["status"] != "FAILURE" { // (fast has no targets)
		t.Errorf("webhook body %v", body)
	}
	want := []string{
		`celos_pool_limit{pool="etl"} 1`,
		`celos_pool_running{pool="etl"}`,
		`celos_pool_waiting{pool="etl"}`,
		`celos_notifications_total{event="failure",result="delivered"}`,
		`celos_sla_missed_total{workflow="fast"}`,
	}
	var metrics string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		metrics = get(t, url+"/metrics")
		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(metrics, w)
		}
		if !missing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks one of %q:\n%s", want, grepLines(metrics, "celos_pool", "celos_notif", "celos_sla"))
		}
	}
	// The missed SLA is in the grid (the row's problems and their tooltip)
	// and in the slot's details drawer.
	if grid := get(t, url+"/ui"); !strings.Contains(grid, "sla: SLA missed: not SUCCESS 1m after the slot time") {
		t.Errorf("the grid does not show etl-job's missed SLA:\n%s", grepLines(grid, "etl-job"))
	}
	drawer := get(t, url+"/ui/slot?id=etl-job&time="+start.Format(time.RFC3339))
	if !strings.Contains(drawer, "SLA missed: not SUCCESS 1m after the slot time") {
		t.Errorf("the drawer of etl-job's first slot does not show the missed SLA:\n%s", grepLines(drawer, "SLA", "problem"))
	}
	if strings.Contains(metrics, `celos_sla_missed_total{workflow="etl-job"}`) {
		t.Errorf("etl-job's SLA misses, whose deadlines passed before the server started, were counted:\n%s", grepLines(metrics, "celos_sla"))
	}
	// The undefined pool is in the UI's problems (the workflow page).
	page := get(t, url+"/ui/workflow?id=lost")
	if !strings.Contains(page, "pool &#34;nope&#34; is not defined") && !strings.Contains(page, `pool "nope" is not defined`) {
		t.Errorf("the UI's page of lost does not show the undefined pool:\n%s", grepLines(page, "pool"))
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
