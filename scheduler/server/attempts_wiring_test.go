package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/deploy"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/api"
)

// TestRunWiresAttemptsAndDeploys runs the real server (engine, state
// database, command service) on a workflow whose first attempt fails and
// whose retry succeeds, deployed with a manifest beside its file:
// GET /slot-attempts lists both runs through the server's lister, the UI's
// details list them too, and the grid groups the workflow under its
// project with the deploy's commit, time and user.
func TestRunWiresAttemptsAndDeploys(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows")
	os.Mkdir(wf, 0o755)
	start := time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC)
	marker := filepath.Join(dir, "marker")
	flaky := fixture.Hourly("flaky")
	flaky.ExternalService = fixture.Command("sh", "-c", `[ -e "`+marker+`" ] || { touch "`+marker+`"; echo first attempt fails >&2; exit 3; }`)
	flaky.StartTime = start
	flaky.MaxRetryCount = 1
	file := fixture.WriteProject(t, wf, "wc", flaky)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	man, _ := json.Marshal(deploy.Manifest{Format: deploy.ManifestFormat, Project: "wc", DeployedAt: start, User: "ci", GitCommit: "abcdef0123", WorkflowsSHA256: hex.EncodeToString(sum[:])})
	os.MkdirAll(filepath.Join(wf, deploy.StateDir), 0o755)
	os.WriteFile(filepath.Join(wf, deploy.StateDir, "wc.manifest.json"), man, 0o644)

	cfg := Config{Port: 0, Workflows: wf, DB: filepath.Join(dir, "db"), URLFile: filepath.Join(dir, "url"), Stderr: io.Discard}
	url, _ := startRun(t, cfg, openEngine)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return string(body)
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		status := stepAndRead(t, url, "2015-09-13T13:40Z", "flaky", "2015-09-13T13:00Z")
		if status == "SUCCESS" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flaky@13:00 is %q after 60 s of steps", status)
		}
		time.Sleep(100 * time.Millisecond) // the command runs meanwhile
	}

	var sa api.SlotAttempts
	if err := json.Unmarshal([]byte(get("/slot-attempts?id=flaky&time=2015-09-13T13:00Z")), &sa); err != nil {
		t.Fatal(err)
	}
	if len(sa.Attempts) != 2 || sa.Attempts[0].Status != "exit 3" || sa.Attempts[1].Status != "exit 0" ||
		sa.Slot.ExternalID == nil || *sa.Slot.ExternalID != sa.Attempts[1].ExternalID || sa.Slot.RetryCount != 1 {
		t.Errorf("attempts: %+v", sa)
	}
	detail := get("/ui/slot?f=1&id=flaky&time=2015-09-13T13:00:00.000Z")
	if strings.Count(detail, `<li class="attempt`) != 2 || !strings.Contains(detail, "exit 3") {
		t.Errorf("the UI's details do not list both attempts:\n%s", detail)
	}
	firstLog := get("/ui/log?id=flaky&time=2015-09-13T13:00:00.000Z&ext=" + sa.Attempts[0].ExternalID)
	if !strings.Contains(firstLog, "first attempt fails") {
		t.Errorf("the first attempt's log: %q", firstLog)
	}
	page := get("/ui")
	for _, want := range []string{`data-group="wc"`, "deployed <code>abcdef0</code> · 2015-09-13 13:00 UTC · ci"} {
		if !strings.Contains(page, want) {
			t.Errorf("the UI lacks %q", want)
		}
	}
}
