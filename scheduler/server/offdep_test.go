package server

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/child"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
)

const offdepEnv = "CELOS_TEST_OFFLINE_UNDEPLOY"

// offdepParams are what the child server of the offline-undeploy tests
// needs from its parent.
type offdepParams struct {
	Workflows, DB, Jobs, Pools, URLFile, Marker string
}

// runOffdepChild is the child's body: a plain server (the command
// service, steps asked by the parent) under the signal handling of celos
// server, its pid written to Marker.
func runOffdepChild() error {
	var p offdepParams
	if err := json.Unmarshal([]byte(os.Getenv(offdepEnv)), &p); err != nil {
		return err
	}
	if err := os.WriteFile(p.Marker, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// (On PostgreSQL each child is the same instance restarted, as a
	// server on the same host is: the command jobs it started are its
	// own to poll.)
	cfg := Config{Workflows: p.Workflows, DB: p.DB, Jobs: p.Jobs, Pools: p.Pools, URLFile: p.URLFile,
		InstanceID: "offdep", Lease: time.Second, Stderr: os.Stderr, Version: "test"}
	return run(ctx, cfg, openEngine)
}

// offdepWorkflow is an hourly command workflow of pool etl running cmd.
func offdepWorkflow(id string, cmd ...string) workflow.Workflow {
	return workflow.Workflow{
		ID:                 id,
		Schedule:           workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger:            workflow.Trigger{Type: workflow.TriggerAlways},
		SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
		ExternalService:    workflow.ExternalService{Type: workflow.ServiceCommand, Command: cmd},
		StartTime:          time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC),
		WaitTimeoutSeconds: workflow.NeverTimeout,
		Pool:               "etl",
	}
}

// TestUndeployedWhileNoServerRuns: a real server process (file store;
// PostgreSQL) runs workflow slow's slot, a command job that runs until a
// file appears, in pool etl of limit 1. The server stops — SIGTERM after
// the workflows directory lost slow ("stopped"), or kill -9 after the
// directory lost slow and before a step ran ("killed") — and a new server
// process starts with a workflows directory holding only b, of the same
// pool. The new server never saw slow's definition: still, slow's slot
// keeps its place in etl (b's slot is not submitted while slow's job
// runs), its job is polled, and once the job ends its slot becomes
// SUCCESS and b runs. (Before, slow's slot stayed RUNNING for ever and b
// ran beside it at the new server's first step.)
func TestUndeployedWhileNoServerRuns(t *testing.T) {
	for _, st := range outboxStores {
		for _, how := range []string{"stopped", "killed"} {
			t.Run(st.name+"/"+how, func(t *testing.T) {
				if child.Is(t) {
					child.Start(t, 4<<30, runOffdepChild)
					return
				}
				undeployedWhileNoServerRuns(t, st.db, how == "killed")
			})
		}
	}
}

func undeployedWhileNoServerRuns(t *testing.T, db func(t *testing.T, dir string) string, kill bool) {
	dir := t.TempDir()
	wdir := filepath.Join(dir, "workflows")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(dir, "go")
	slow := offdepWorkflow("slow", "sh", "-c", "while [ ! -e '"+gate+"' ]; do sleep 0.1; done")
	b := offdepWorkflow("b", "true")
	fixture.WriteProject(t, wdir, "p", slow)
	pools := filepath.Join(dir, "pools.json")
	if err := os.WriteFile(pools, []byte(`{"pools": {"etl": {"limit": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := offdepParams{Workflows: wdir, DB: db(t, dir), Jobs: filepath.Join(dir, "jobs"), Pools: pools}
	start := func(n int) (*child.Process, string, int) {
		t.Helper()
		p.URLFile = filepath.Join(dir, "url"+strconv.Itoa(n))
		p.Marker = filepath.Join(dir, "pid"+strconv.Itoa(n))
		raw, _ := json.Marshal(p)
		t.Setenv(offdepEnv, string(raw))
		proc := child.Start(t, 4<<30, nil)
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			u, _ := os.ReadFile(p.URLFile)
			pid, _ := os.ReadFile(p.Marker)
			if n, _ := strconv.Atoi(string(pid)); len(u) > 0 && n > 0 {
				return proc, strings.TrimSpace(string(u)), n
			}
			if exited, err := proc.Exited(); exited {
				t.Fatalf("server %d ended before it served (%v):\n%s", n, err, proc.Output())
			}
			if time.Now().After(deadline) {
				t.Fatalf("server %d did not serve within 2 minutes:\n%s", n, proc.Output())
			}
		}
	}
	const slotAt = "2015-09-13T13:00Z"
	proc, url, pid := start(1)
	for end := time.Now().Add(time.Minute); stepAndRead(t, url, "2015-09-13T13:40Z", "slow", slotAt) != "RUNNING"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("slow's slot not RUNNING after a minute of steps:\n%s", proc.Output())
		}
	}
	if kill {
		// Undeployed, and the server killed before a step sees it.
		fixture.WriteProject(t, wdir, "p", b)
		proc.Kill()
	} else {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if exited, err := proc.Exited(); exited {
				if err != nil {
					t.Fatalf("server 1 did not stop cleanly (%v):\n%s", err, proc.Output())
				}
				break
			}
			if time.Now().After(end) {
				t.Fatalf("server 1 still runs a minute after SIGTERM:\n%s", proc.Output())
			}
		}
		fixture.WriteProject(t, wdir, "p", b) // undeployed while no server runs
	}
	proc, url, _ = start(2)
	// Several steps (and, on PostgreSQL, the killed instance's leases
	// expire meanwhile): b's slot waits for the pool while slow's job
	// runs, and slow's slot stays RUNNING.
	sawStep := false
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		switch got := stepAndRead(t, url, "2015-09-13T13:41Z", "b", slotAt); got {
		case "RUNNING", "SUCCESS", "FAILURE":
			t.Fatalf("b's slot is %s while undeployed slow's job still runs in pool etl of limit 1:\n%s", got, proc.Output())
		case "READY":
			sawStep = true
		}
		if got := stepAndRead(t, url, "2015-09-13T13:41Z", "slow", slotAt); got != "RUNNING" {
			t.Fatalf("slow's slot is %q before its job ended, want RUNNING:\n%s", got, proc.Output())
		}
	}
	if !sawStep {
		t.Fatalf("b's slot never became READY in 4 s of steps:\n%s", proc.Output())
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		s := stepAndRead(t, url, "2015-09-13T13:42Z", "slow", slotAt)
		if s == "SUCCESS" {
			break
		}
		if s != "RUNNING" {
			t.Fatalf("slow's slot is %q, want RUNNING until its job ends, then SUCCESS:\n%s", s, proc.Output())
		}
		if time.Now().After(end) {
			t.Fatalf("undeployed slow's slot still RUNNING a minute after its job ended (never polled):\n%s", proc.Output())
		}
	}
	for end := time.Now().Add(time.Minute); stepAndRead(t, url, "2015-09-13T13:43Z", "b", slotAt) != "SUCCESS"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("b's slot not SUCCESS a minute after slow's job ended and freed the pool:\n%s", proc.Output())
		}
	}
}
