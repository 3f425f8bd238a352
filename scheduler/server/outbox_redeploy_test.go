package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/servertest"
)

// TestPendingDeliveryFollowsARedeployedURL: a slot fails while its
// webhook target is down; the server stops with the delivery pending; the
// operator redeploys the workflow with the target's URL changed (the old
// endpoint stays down) and starts the server again. The failure arrives
// at the new URL under its delivery id, and the old URL is not tried
// again (before: the outbox's record kept the old URL, tried 5 times per
// start).
func TestPendingDeliveryFollowsARedeployedURL(t *testing.T) {
	for _, st := range outboxStores {
		t.Run(st.name, func(t *testing.T) {
			dir := t.TempDir()
			old, moved := newHookReceiver(t), newHookReceiver(t)
			moved.setDown(false)
			logs := &servertest.LockedBuffer{}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the servers' log:\n%s", logs)
				}
			})
			cfg := Config{Workflows: failingProject(t, dir, old.URL), DB: st.db(t, dir), AutoSchedule: 20 * time.Millisecond,
				Jobs: filepath.Join(dir, "jobs"), URLFile: filepath.Join(dir, "url"), Stderr: logs, Version: "test"}
			_, stop := startRun(t, cfg, failingOpener)
			old.wait(t, "a first attempt of the failure at the old URL", func(tried, _ []string) bool { return len(tried) > 0 })
			id := old.firstTried()
			if err := stop(); err != nil {
				t.Fatalf("run: %v", err)
			}
			old.mu.Lock()
			triedBefore := len(old.tried)
			old.mu.Unlock()
			failingProject(t, dir, moved.URL) // the redeploy: the same workflow, its target's URL changed
			os.Remove(cfg.URLFile)
			url, _ := startRun(t, cfg, failingOpener)
			moved.wait(t, "the failure delivered at the new URL after the restart", acceptedOnce(id))
			waitOutboxEmpty(t, url)
			old.mu.Lock()
			defer old.mu.Unlock()
			if len(old.tried) != triedBefore {
				t.Errorf("the old URL was tried again after the redeploy: %q (%d attempts before the restart)", old.tried, triedBefore)
			}
		})
	}
}
