package server

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/schema/workflow"
)

// TestUndeployedWorkflowsDeliverySentOnPostgres: one celos server on
// PostgreSQL (a cluster of one). A slot fails while its webhook target is
// down; the server stops with the delivery pending; the operator removes
// the workflow (another one names the same target) and starts the server
// again, the target up. The failure
// arrives under its id (before: no instance steps an undeployed workflow,
// so its delivery waited in the outbox until the 7-day bound removed it,
// "sent all the same by a single server" being true of the file store
// only).
func TestUndeployedWorkflowsDeliverySentOnPostgres(t *testing.T) {
	dir := t.TempDir()
	hook := newHookReceiver(t)
	logs := &servertest.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the servers' log:\n%s", logs)
		}
	})
	wdir := failingProject(t, dir, hook.URL)
	cfg := Config{Workflows: wdir, DB: pgtest.Shared(t).CreateDB(t), AutoSchedule: 20 * time.Millisecond, InstanceID: "only", Lease: time.Second,
		Jobs: filepath.Join(dir, "jobs"), URLFile: filepath.Join(dir, "url"), Stderr: logs, Version: "test"}
	_, stop := startRun(t, cfg, failingOpener)
	hook.wait(t, "a first attempt of the failure", func(tried, _ []string) bool { return len(tried) > 0 })
	id := hook.firstTried()
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	// etl goes; keep, which names the same target, stays (a removed
	// workflow's deliveries go only to a URL a deployed workflow names).
	keep := workflow.Workflow{ID: "keep", Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 0 1 1 ? 2099", TimeZone: "UTC"},
		Trigger: workflow.Trigger{Type: workflow.TriggerAlways}, SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
		ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"true"}},
		StartTime:       time.Now().UTC().Truncate(time.Hour), WaitTimeoutSeconds: workflow.NeverTimeout,
		Notify: []workflow.Notification{{Type: workflow.NotifyWebhook, URL: hook.URL + "/hook", Events: []string{workflow.EventFailure}}}}
	fixture.WriteProject(t, wdir, "p", keep)
	hook.setDown(false)
	cfg.URLFile = filepath.Join(dir, "url2")
	url, _ := startRun(t, cfg, failingOpener)
	hook.wait(t, "the undeployed workflow's failure delivered after the restart", acceptedOnce(id))
	waitOutboxEmpty(t, url)
}
