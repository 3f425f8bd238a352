package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/internal/testenv/servertest"
)

// TestUndeployedWorkflowsDeliverySentOnPostgres: one celos server on
// PostgreSQL (a cluster of one). A slot fails while its webhook target is
// down; the server stops with the delivery pending; the operator removes
// the workflow and starts the server again, the target up. The failure
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
	if err := os.Remove(filepath.Join(wdir, "p.json")); err != nil {
		t.Fatal(err)
	}
	hook.setDown(false)
	cfg.URLFile = filepath.Join(dir, "url2")
	url, _ := startRun(t, cfg, failingOpener)
	hook.wait(t, "the undeployed workflow's failure delivered after the restart", acceptedOnce(id))
	waitOutboxEmpty(t, url)
}
