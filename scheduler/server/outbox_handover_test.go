package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// handoverProject writes 6 workflows, each with the slots of the last 4
// hours failing (slowFailingService), and two webhook targets.
func handoverProject(t *testing.T, dir, url string) (string, []string) {
	t.Helper()
	wdir := filepath.Join(dir, "workflows")
	if err := os.MkdirAll(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	var ws []workflow.Workflow
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("wf-%d", i)
		ids = append(ids, id)
		ws = append(ws, workflow.Workflow{ID: id, Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
			Trigger: workflow.Trigger{Type: workflow.TriggerAlways}, SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 4},
			ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"false"}},
			StartTime:       time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour), WaitTimeoutSeconds: workflow.NeverTimeout,
			Notify: []workflow.Notification{
				{Type: workflow.NotifyWebhook, URL: url + "/a", Events: []string{workflow.EventFailure}},
				{Type: workflow.NotifyWebhook, URL: url + "/b", Events: []string{workflow.EventFailure}}}})
	}
	p := &workflow.Project{Format: workflow.FormatVersion, Project: "p", Workflows: ws}
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wdir, "p.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return wdir, ids
}

// TestOutboxHandOversBetweenLiveInstances: two live servers on one
// PostgreSQL database; A runs throughout, B joins and leaves gracefully
// 6 times at random moments, so the 6 workflows' leases move between
// live instances while their 24 failures (2 targets each, every first
// attempt refused) are being delivered. Every failure reaches both
// targets under exactly one delivery id; ids that arrived more than once
// (two live instances, or a release and a hand-over) are logged.
func TestOutboxHandOversBetweenLiveInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("two servers joining and leaving: not with -short")
	}
	dir := t.TempDir()
	hook := newKillLoopReceiver(t)
	wdir, ids := handoverProject(t, dir, hook.URL)
	dsn := pgtest.Shared(t).CreateDB(t)
	logs := &servertest.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the servers' log:\n%s", logs)
		}
	})
	cfg := func(id string) Config {
		return Config{Workflows: wdir, DB: dsn, Jobs: filepath.Join(dir, "jobs-"+id), AutoSchedule: 20 * time.Millisecond,
			InstanceID: id, Lease: time.Second, URLFile: filepath.Join(dir, "url-"+id), Stderr: logs, Version: "test"}
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	t.Logf("seed %d", seed)
	url, _ := startRun(t, cfg("a"), slowFailingOpener)
	for i := range 6 {
		c := cfg(fmt.Sprintf("b%d", i))
		_, stop := startRun(t, c, slowFailingOpener)
		time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond)
		if err := stop(); err != nil {
			t.Fatalf("B (%s): %v", c.InstanceID, err)
		}
		time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
	}
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	failed := map[string][]string{}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		n := 0
		for _, id := range ids {
			var ws api.WorkflowSlots
			if err := json.Unmarshal([]byte(get(t, url+"/workflow-slots?id="+id+"&start="+slot.FormatTime(start))), &ws); err != nil {
				t.Fatal(err)
			}
			failed[id] = failed[id][:0]
			for _, s := range ws.Slots {
				if s.Status == slot.Failure {
					failed[id] = append(failed[id], s.Time)
				}
			}
			n += len(failed[id])
		}
		if n == 24 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 24 slots FAILURE within 2 minutes", n)
		}
	}
	waitOutboxEmpty(t, url)
	// (The last deliveries: the outbox's record goes after the answer.)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	dups := 0
	for id, n := range hook.byID {
		if n > 1 {
			dups++
			t.Logf("delivery %s accepted %d times", id, n)
		}
	}
	for wf, ts := range failed {
		for _, s := range ts {
			for _, target := range []string{"/a", "/b"} {
				if got := hook.bySlot[target+" "+wf+" "+s]; len(got) != 1 {
					t.Errorf("the failure of %s@%s reached %s under %d delivery ids, want 1: %v", wf, s, target, len(got), got)
				}
			}
		}
	}
	t.Logf("%d deliveries accepted under %d ids, %d ids more than once; %d let go by an instance that lost the workflow, %d offered again from the outbox",
		sum(hook.byID), len(hook.byID), dups, strings.Count(logs.String(), "now another instance"), strings.Count(logs.String(), "offered again"))
}
