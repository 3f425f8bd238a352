package server

import (
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/schema/workflow"
)

// TestUndeployedJobPolledUnderItsLease: the real server on PostgreSQL
// (a cluster of one instance, with short leases), a command workflow
// whose job runs until a file appears. The workflow is undeployed while
// its job runs; the instance keeps the workflow's lease (the cluster
// shares out the departed workflows too) for several lease periods, and
// when the job ends its slot's row becomes SUCCESS.
func TestUndeployedJobPolledUnderItsLease(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	u, err := neturl.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows")
	if err := os.Mkdir(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(dir, "go")
	start := time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC)
	mk := func(id string, cmd ...string) workflow.Workflow {
		return workflow.Workflow{
			ID:                 id,
			Schedule:           workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
			Trigger:            workflow.Trigger{Type: workflow.TriggerAlways},
			SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
			ExternalService:    workflow.ExternalService{Type: workflow.ServiceCommand, Command: cmd},
			StartTime:          start,
			WaitTimeoutSeconds: workflow.NeverTimeout,
		}
	}
	write := func(ws ...workflow.Workflow) {
		t.Helper()
		b, err := (&workflow.Project{Format: workflow.FormatVersion, Project: "p", Workflows: ws}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wf, "p.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slow := mk("slow", "sh", "-c", "while [ ! -e '"+gate+"' ]; do sleep 0.1; done")
	other := mk("other", "true")
	write(slow, other)
	lease := 600 * time.Millisecond
	cfg := Config{Port: 0, Workflows: wf, DB: dsn, Jobs: filepath.Join(dir, "jobs"), URLFile: filepath.Join(dir, "url"),
		Stderr: &servertest.LockedBuffer{}, Lease: lease}
	url, _ := startRun(t, cfg, openEngine)
	row := func() string {
		t.Helper()
		var got string
		if err := queryOne(srv, dbName, "SELECT status FROM celos_slots WHERE workflow = 'slow' AND slot_time = '2015-09-13T13:00Z'", &got); err != nil {
			return ""
		}
		return got
	}
	for end := time.Now().Add(time.Minute); row() != "RUNNING"; {
		if time.Now().After(end) {
			t.Fatalf("slow's slot is %q after a minute of steps, want RUNNING", row())
		}
		stepAndRead(t, url, "2015-09-13T13:40Z", "slow", "2015-09-13T13:00Z")
		time.Sleep(100 * time.Millisecond) // (the cluster takes its leases on its own)
	}
	write(other) // slow undeployed while its job runs
	stepAndRead(t, url, "2015-09-13T13:41Z", "other", "2015-09-13T13:00Z")
	// Several renewals of the leases pass: one of a workflow the cluster
	// no longer shares out would be released by now.
	for end := time.Now().Add(4 * lease); time.Now().Before(end); time.Sleep(lease / 4) {
		stepAndRead(t, url, "2015-09-13T13:41Z", "other", "2015-09-13T13:00Z")
	}
	if got := row(); got != "RUNNING" {
		t.Fatalf("slow's slot is %q before its job ended, want RUNNING", got)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(time.Minute); row() != "SUCCESS"; {
		if time.Now().After(end) {
			t.Fatalf("undeployed slow's slot is %q a minute after its job ended, want SUCCESS (polled under its lease)", row())
		}
		stepAndRead(t, url, "2015-09-13T13:42Z", "other", "2015-09-13T13:00Z")
		time.Sleep(100 * time.Millisecond) // the command ends on its own
	}
}
