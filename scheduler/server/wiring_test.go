package server

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
)

// TestRunWiresOozie runs the real server (engine, state database, services)
// with --defaults naming a (fake) Oozie: a workflow of type oozie that
// names no URL is submitted there with the default properties and its own,
// runs and succeeds, and /metrics counts the submission.
func TestRunWiresOozie(t *testing.T) {
	oz, err := ooziefake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer oz.Close()
	oz.SetPlan(func(map[string]string) []string { return []string{"RUNNING", "SUCCEEDED"} })

	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows")
	os.Mkdir(wf, 0o755)
	def := fmt.Sprintf(`{"CELOS_DEFAULT_OOZIE": %q, "CELOS_DEFAULT_OOZIE_PROPERTIES": {"queue": "etl", "user.name": "celos"}}`, oz.URL)
	os.WriteFile(filepath.Join(dir, "defaults.json"), []byte(def), 0o644)
	start := time.Date(2015, 9, 13, 13, 0, 0, 0, time.UTC)
	wordcount := fixture.Hourly("wordcount")
	wordcount.ExternalService = fixture.Oozie(map[string]string{
		"oozie.wf.application.path": "hdfs:///apps/wordcount", "inputDir": "/input/${year}-${month}-${day}/${hour}"})
	wordcount.StartTime = start
	fixture.WriteProject(t, wf, "wc", wordcount)

	cfg := Config{Port: 0, Workflows: wf, DB: filepath.Join(dir, "db"), Defaults: dir, URLFile: filepath.Join(dir, "url"), Stderr: io.Discard}
	url, _ := startRun(t, cfg, openEngine)

	status := ""
	for i := 0; i < 10 && status != "SUCCESS"; i++ {
		status = stepAndRead(t, url, "2015-09-13T13:40Z", "wordcount", "2015-09-13T13:00Z")
	}
	if status != "SUCCESS" {
		t.Fatalf("slot is %s after 10 steps", status)
	}
	jobs := oz.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("%d Oozie jobs", len(jobs))
	}
	conf := jobs[0].Conf
	if conf["queue"] != "etl" || conf["inputDir"] != "/input/2015-09-13/13" || conf["celosWorkflowName"] != "wordcount@2015-09-13T13:00Z" {
		t.Errorf("configuration Oozie received: %v", conf)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`celos_submissions_total{service="oozie"} 1`, `celos_slot_transitions_total{status="SUCCESS"} 1`, "celos_hdfs_calls_total 0"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
