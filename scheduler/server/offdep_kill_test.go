package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler/command"
)

// TestKillOfADepartedJob: the real server (file store, the command
// service) runs slow's slot, a job that never ends by itself; slow is
// undeployed. POST /kill of that slot answers 200 with the slot KILLED,
// the command job ends killed (its exit record says so), and the slot
// stays KILLED at later steps. A kill of another slot of slow (not a
// departed one) answers 404 unknown_workflow. (Before, the departed job
// could be killed only on the cluster: 404 for the running slot too.)
func TestKillOfADepartedJob(t *testing.T) {
	dir := t.TempDir()
	wdir := filepath.Join(dir, "workflows")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	slow := offdepWorkflow("slow", "sleep", "600")
	slow.Pool = ""
	other := offdepWorkflow("other", "true")
	other.Pool = ""
	fixture.WriteProject(t, wdir, "p", slow, other)
	jobs := filepath.Join(dir, "jobs")
	cfg := Config{Workflows: wdir, DB: filepath.Join(dir, "db"), Jobs: jobs, URLFile: filepath.Join(dir, "url"),
		Stderr: &servertest.LockedBuffer{}, Version: "test"}
	url, _ := startRun(t, cfg, openEngine)
	const slotAt = "2015-09-13T13:00Z"
	for end := time.Now().Add(time.Minute); stepAndRead(t, url, "2015-09-13T13:40Z", "slow", slotAt) != "RUNNING"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("slow's slot not RUNNING after a minute of steps")
		}
	}
	fixture.WriteProject(t, wdir, "p", other) // slow undeployed while its job runs
	if got := stepAndRead(t, url, "2015-09-13T13:41Z", "slow", slotAt); got != "RUNNING" {
		t.Fatalf("slow's slot is %q after the undeploy, want RUNNING", got)
	}
	post := func(target string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(url+target, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := post("/kill?id=slow&time=2015-09-13T14:00Z"); code != 404 || body["code"] != "unknown_workflow" {
		t.Errorf("kill of a slot of undeployed slow that is not running: %d %v, want 404 unknown_workflow", code, body)
	}
	code, body := post("/kill?id=slow&time=" + slotAt)
	if code != 200 || body["status"] != "KILLED" {
		t.Fatalf("kill of undeployed slow's running slot: %d %v, want 200 and the slot KILLED", code, body)
	}
	ext, _ := body["externalID"].(string)
	_, job, ok := strings.Cut(ext, "@")
	if !ok {
		t.Fatalf("external ID %q", ext)
	}
	for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(jobs, "slow", job, "exit.json"))
		if err == nil {
			var r command.ExitRecord
			if err := json.Unmarshal(b, &r); err != nil || !r.Killed {
				t.Fatalf("slow's job ended: %s (%v), want killed", b, err)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("slow's job has no exit record a minute after the kill: %v", err)
		}
	}
	for range 3 {
		if got := stepAndRead(t, url, "2015-09-13T13:42Z", "slow", slotAt); got != "KILLED" {
			t.Fatalf("slow's slot is %q after the kill, want KILLED", got)
		}
	}
}
