package faults

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// countingService is an external service that records submissions; every
// job succeeds at once.
type countingService struct {
	mu      sync.Mutex
	submits []string
}

func (c *countingService) Submit(_ context.Context, _ *workflow.Workflow, id slot.ID) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.submits = append(c.submits, id.String())
	return "job-" + id.String(), nil
}

func (c *countingService) Status(context.Context, *workflow.Workflow, string) (external.Status, error) {
	return external.Status{Success: true, Detail: "done"}, nil
}

func (c *countingService) Kill(context.Context, *workflow.Workflow, string) error { return nil }

func (c *countingService) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.submits)
}

// makeReadOnly makes the directory tree unwritable, even for root: with
// chattr +i (immutable) when running as root, else with chmod. The test
// is skipped when neither works here (failed in CI, see skipOrFailInCI).
// It is undone when the test ends.
func makeReadOnly(t *testing.T, dir string) (undo func()) {
	t.Helper()
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "-R", "+i", dir).CombinedOutput(); err != nil {
			skipOrFailInCI(t, "running as root and chattr +i does not work here (needs e2fsprogs and a file system with the immutable attribute): %v %s", err, out)
		}
		undo = func() { exec.Command("chattr", "-R", "-i", dir).Run() }
	} else {
		var dirs []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range dirs {
			os.Chmod(d, 0o555)
		}
		undo = func() {
			for _, d := range dirs {
				os.Chmod(d, 0o755)
			}
		}
	}
	t.Cleanup(undo)
	// Check that it took.
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); err == nil {
		os.Remove(filepath.Join(dir, "probe"))
		undo()
		skipOrFailInCI(t, "cannot make a directory read-only here")
	}
	return undo
}

// snapshot maps every path under dir to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = string(b)
		return nil
	})
	return out
}

// TestReadOnlyStateDB: the state directory turns read-only under a running
// engine. A step fails loudly (POST /scheduler answers 500 naming the state
// database, the log has an ERROR line, the slots' problems say why), nothing
// is submitted (the submit intent could not be written first), no file in
// the state directory changes, is added or is left half-written; reruns and
// pauses are refused with 500. Once the directory is writable again the
// next step does the work.
func TestReadOnlyStateDB(t *testing.T) {
	dir := t.TempDir()
	wfDir, dbDir := filepath.Join(dir, "wf"), filepath.Join(dir, "db")
	os.MkdirAll(wfDir, 0o755)
	t0 := time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)
	w := fixture.Hourly("wf")
	w.SchedulingStrategy.Concurrency = 10
	w.StartTime = t0
	fixture.WriteProject(t, wfDir, "ro", w)
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := &countingService{}
	var logBuf servertest.LockedBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(eng, api.Options{Logger: log})
	post := func(target string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", target, nil))
		return rec.Code, rec.Body.String()
	}
	now := "2015-09-13T02:30Z"
	if code, body := post("/scheduler?time=" + now); code != 200 {
		t.Fatalf("first step: %d %s", code, body)
	}
	// Slots 00:00, 01:00, 02:00 are READY.
	undo := makeReadOnly(t, dbDir)
	before := snapshot(t, dbDir)

	for _, at := range []string{now, "2015-09-13T03:30Z"} { // submissions; a new slot's first write
		code, body := post("/scheduler?time=" + at)
		// A 500 names a reference; the log has the detail under it.
		ref := regexp.MustCompile(`reference ([0-9a-f]{16})`).FindStringSubmatch(body)
		if code != http.StatusInternalServerError || ref == nil {
			t.Fatalf("step at %s on a read-only state database: %d %s", at, code, body)
		}
		if !regexp.MustCompile(`(?m)^.*state database.*reference=` + ref[1] + `.*$`).MatchString(logBuf.String()) {
			t.Fatalf("step at %s: the log has no line naming the state database under reference %s:\n%s", at, ref[1], logBuf.String())
		}
	}
	if n := svc.count(); n != 0 {
		t.Errorf("%d jobs submitted without a recorded submit intent", n)
	}
	for _, target := range []string{"/pause?id=wf&paused=true", "/kill?id=wf&time=2015-09-13T00:00Z"} {
		if code, body := post(target); code != http.StatusInternalServerError {
			t.Errorf("POST %s on a read-only state database: %d %s", target, code, body)
		}
	}
	if after := snapshot(t, dbDir); !equalMaps(before, after) {
		t.Errorf("the read-only state directory changed:\nbefore %v\nafter  %v", before, after)
	}
	if !strings.Contains(logBuf.String(), "level=ERROR msg=\"step failed\"") {
		t.Errorf("no ERROR line for the failed step:\n%s", logBuf.String())
	}
	problems := eng.Problems("wf")
	if len(problems) == 0 {
		t.Error("no problem recorded for the slots")
	}
	for _, pr := range problems {
		if pr.Op != "submit" && pr.Op != "persist" {
			t.Errorf("problem %+v", pr)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `celos_steps_total{result="error"} 2`) {
		t.Errorf("metrics do not count the failed steps:\n%s", grepLines(rec.Body.String(), "celos_steps_total"))
	}

	// Writable again: the next step submits every READY slot, once.
	undo()
	if code, body := post("/scheduler?time=2015-09-13T03:30Z"); code != 200 {
		t.Fatalf("step after the repair: %d %s", code, body)
	}
	if n := svc.count(); n != 3 {
		t.Errorf("%d submissions after the repair, want 3", n)
	}
	for h := 0; h < 3; h++ {
		st, _, _ := db.Get(slot.ID{Workflow: "wf", Time: t0.Add(time.Duration(h) * time.Hour)})
		if st.Status != slot.Running {
			t.Errorf("slot %02d:00 is %s after the repair", h, st.Status)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func grepLines(s, sub string) string {
	var out bytes.Buffer
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}
