package ui

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// loadingNow is the clock of the tests of a grid whose state is still
// being read.
var loadingNow = time.Date(2026, 11, 24, 13, 20, 0, 0, time.UTC)

// writeLoadingInstallation writes n hourly workflows in two projects and,
// in a state database, their last 6 hours: SUCCESS, a FAILURE in every
// 10th workflow, a RUNNING slot in every 25th, every 30th paused. It
// returns the workflows and database directories.
func writeLoadingInstallation(t *testing.T, n int) (wfDir, dbDir string) {
	t.Helper()
	dir := t.TempDir()
	wfDir, dbDir = filepath.Join(dir, "workflows"), filepath.Join(dir, "db")
	if err := os.MkdirAll(wfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := loadingNow.Truncate(time.Hour).Add(-6 * time.Hour)
	var a, b []workflow.Workflow
	for i := range n {
		w := fixture.Hourly(fmt.Sprintf("wf-%04d", i))
		w.ExternalService = fixture.Command("true")
		w.StartTime = start
		if i%2 == 0 {
			a = append(a, w)
		} else {
			b = append(b, w)
		}
	}
	fixture.Write(t, wfDir, fixture.Project("alpha", a...))
	fixture.Write(t, wfDir, fixture.Project("beta", b...))
	db, err := statedb.OpenWith(dbDir, statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range n {
		wf := fmt.Sprintf("wf-%04d", i)
		for h := range 6 {
			st := slot.Success
			switch {
			case i%10 == 3 && h == 2:
				st = slot.Failure
			case i%25 == 0 && h == 0:
				st = slot.Running
			}
			id := slot.ID{Workflow: wf, Time: start.Add(time.Duration(h) * time.Hour)}
			if err := db.Put(slot.State{ID: id, Status: st, ExternalID: "job-" + wf}); err != nil {
				t.Fatal(err)
			}
		}
		if i%30 == 0 {
			if err := db.SetPaused(wf, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	return wfDir, dbDir
}

// openLoadingEngine opens the state database (as a server does after a
// restart: nothing read yet) and the engine over it.
func openLoadingEngine(t *testing.T, wfDir, dbDir string) (*engine.Engine, *statedb.DB) {
	t.Helper()
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng, err := engine.New(engine.Options{
		WorkflowsDir: wfDir,
		Store:        db,
		Services:     map[string]external.Service{},
		FS:           trigger.NewMux(""),
	})
	if err != nil {
		t.Fatal(err)
	}
	return eng, db
}

// heldLoad is a background load of a real state database that reads
// nothing until the test lets it: Unread names every workflow not in
// memory until then (statedb.DB.Unread during its LoadInBackground), and
// reads of the page's rows go to the database itself.
type heldLoad struct {
	db   *statedb.DB
	mu   sync.Mutex
	done bool
}

func (l *heldLoad) Unread(wfs []string) map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	out := map[string]bool{}
	for _, wf := range wfs {
		if !l.db.Loaded(wf) {
			out[wf] = true
		}
	}
	return out
}

func (l *heldLoad) Preload(wfs []string, workers int) { l.db.Preload(wfs, workers) }

// finish runs the held load to its end.
func (l *heldLoad) finish(wfs []string) {
	l.db.Preload(wfs, 2)
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

func newEngineHandler(t *testing.T, eng *engine.Engine, opts Options) http.Handler {
	t.Helper()
	h, err := New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var rowRE = regexp.MustCompile(`(?m)^<div class="row[^"]*" data-w="([^"]+)".*$`)

// pageRows maps the workflow of each row of a page to its HTML.
func pageRows(body string) map[string]string {
	out := map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[0]
	}
	return out
}

// TestGridWhileStateLoads: after a restart, while the background load has
// not read the state of most workflows, GET /ui answers without reading
// them: the page's rows are read (on demand) and shown as when everything
// is read, the summary says how many workflows are still being read, and
// no other workflow's state is read by the request. Once the load ended,
// every view is the same as the one of a UI that read everything itself.
func TestGridWhileStateLoads(t *testing.T) {
	const n = 260 // more than cacheRows: the counts cache is used
	wfDir, dbDir := writeLoadingInstallation(t, n)
	views := []string{"/ui", "/ui?problems=1", "/ui?page=3", "/ui?q=wf-01"}
	now := func() time.Time { return loadingNow }

	// The reference: a UI that reads every workflow's state itself.
	eng, db := openLoadingEngine(t, wfDir, dbDir)
	ref := map[string]string{}
	h := newEngineHandler(t, eng, Options{Now: now})
	for _, v := range views {
		ref[v] = wantStatus(t, get(t, h, v), 200)
	}
	db.Close()

	eng, db = openLoadingEngine(t, wfDir, dbDir)
	load := &heldLoad{db: db}
	h = newEngineHandler(t, eng, Options{Now: now, State: load})
	body := wantStatus(t, get(t, h, "/ui"), 200)
	rows := pageRows(body)
	if len(rows) == 0 {
		t.Fatalf("no rows on the first page while the state loads:\n%s", body)
	}
	refRows := pageRows(ref["/ui"])
	if diff := cmp.Diff(refRows, rows); diff != "" {
		t.Errorf("rows of the first page while the state loads differ from the fully read page (-want +got):\n%s", diff)
	}
	for i := range n {
		wf := fmt.Sprintf("wf-%04d", i)
		if _, shown := rows[wf]; shown != db.Loaded(wf) {
			t.Errorf("%s: on the page %v, state read %v: a page reads the state of its own rows only", wf, shown, db.Loaded(wf))
		}
	}
	note := fmt.Sprintf(`<b>%d</b> workflows still being read`, n-len(rows))
	if !strings.Contains(body, note) {
		t.Errorf("first page while the state loads: no %q in\n%s", note, body)
	}
	for _, v := range views[1:] {
		if b := wantStatus(t, get(t, h, v), 200); !strings.Contains(b, "still being read") {
			t.Errorf("%s while the state loads: no loading note", v)
		}
	}

	load.finish(eng.WorkflowIDs())
	for _, v := range views {
		got := wantStatus(t, get(t, h, v), 200)
		if diff := cmp.Diff(ref[v], got); diff != "" {
			t.Errorf("%s after the load differs from the fully read page (-want +got):\n%s", v, diff)
		}
	}
}
