package ui

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// engineFixture is a real installation in a temp dir: the slot engine over
// a state database, the command service running local processes, and a
// compiled workflows file.
type engineFixture struct {
	eng   *engine.Engine
	cmd   *command.Service
	now   time.Time
	input string
	// workflows is the workflows directory.
	workflows string
}

// The fixture's workflows, stepped at engineNow.
var engineNow = time.Date(2026, 11, 22, 14, 37, 0, 0, time.UTC)

func newEngineFixture(t *testing.T) *engineFixture {
	t.Helper()
	dir := t.TempDir()
	input := filepath.Join(dir, "input")
	for _, d := range []string{"workflows", "db", "jobs", "input"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := engineNow.Truncate(time.Hour).Add(-7 * time.Hour)
	fails := fixture.Hourly("fails")
	fails.SchedulingStrategy.Concurrency = 4
	fails.ExternalService = fixture.Command("sh", "-c", "echo checking ${year}-${month}-${day}T${hour}; echo no input for ${hour}:00 >&2; exit 3")
	fails.StartTime = start
	wordcount := fixture.Hourly("wordcount")
	wordcount.SchedulingStrategy.Concurrency = 4
	wordcount.Trigger = workflow.Trigger{Type: workflow.TriggerHDFSCheck, FS: "file:///", Path: input + "/${year}-${month}-${day}T${hour}/_READY"}
	wordcount.ExternalService = fixture.Command("sh", "-c", "echo counted words of ${year}-${month}-${day}T${hour}")
	wordcount.StartTime = start
	wordcount.MaxRetryCount = 1
	wordcount.Contacts = []workflow.Contact{{Name: "Data team", Email: "data@example.com"}}
	proj := fixture.Project("uitest", fails, wordcount)
	if err := proj.Validate(); err != nil {
		t.Fatal(err)
	}
	fixture.Write(t, filepath.Join(dir, "workflows"), proj)
	if err := os.WriteFile(filepath.Join(dir, "workflows", "broken.json"), []byte(`{"format": "celos.dev/workflows/v0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Input for all but the last two hours.
	for h := 7; h >= 2; h-- {
		p := filepath.Join(input, engineNow.Truncate(time.Hour).Add(-time.Duration(h)*time.Hour).Format("2006-01-02T15"))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "_READY"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cmd, err := command.New(filepath.Join(dir, "jobs"), command.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{
		WorkflowsDir: filepath.Join(dir, "workflows"),
		Store:        db,
		Services:     map[string]external.Service{workflow.ServiceCommand: cmd},
		FS:           trigger.NewMux(""),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &engineFixture{eng: eng, cmd: cmd, now: engineNow, input: input, workflows: filepath.Join(dir, "workflows")}
}

// settle steps until no slot of the window is READY or RUNNING except
// those waiting for input, waiting for the command jobs in between.
func (f *engineFixture) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const maxSteps = 40
	for i := 0; i < maxSteps; i++ {
		if err := f.eng.Step(ctx, f.now, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.cmd.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		busy := false
		for _, id := range f.eng.WorkflowIDs() {
			sl, err := f.eng.Slots(ctx, id, f.now.Add(-8*time.Hour), f.now)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sl {
				if s.Status == slot.Ready || s.Status == slot.Running {
					busy = true
				}
			}
		}
		if !busy {
			return
		}
	}
	t.Fatalf("slots still READY or RUNNING after %d steps", maxSteps)
}

// commandLogs opens a command slot's log as `celos server` does.
func commandLogs(cmd *command.Service) LogFunc {
	return func(_ context.Context, w *workflow.Workflow, st slot.State) (io.ReadCloser, error) {
		if st.ExternalID == "" {
			return nil, fmt.Errorf("slot %s has no local run: %w", st.ID, fs.ErrNotExist)
		}
		p, err := cmd.LogPath(st.ExternalID)
		if err != nil {
			return nil, err
		}
		return os.Open(p)
	}
}

func TestBrowserRealEngine(t *testing.T) {
	ctx := newBrowser(t)
	f := newEngineFixture(t)
	f.settle(t)
	clock := func() time.Time { return f.now }
	srv := uiServer(t, f.eng, clock, Options{SlotLog: commandLogs(f.cmd), Version: "test",
		Config: Config{Groups: []Group{{Name: "Pipelines", Workflows: []string{"wordcount", "fails"}}}}})

	run(t, ctx, "load the grid", chromedp.Navigate(srv.URL+"/ui?cols=24"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := checkGridAgainstAPI(t, ctx, srv.URL)
	// What the fixture must have produced: wordcount succeeded where its
	// input exists and waits for the last two hours; fails failed.
	wc := rowOf(t, g, "wordcount")
	hour := f.now.Truncate(time.Hour)
	if c := wc.Cells[colOf(t, g, hour.Add(-3*time.Hour))]; c != "s:" {
		t.Errorf("wordcount 3 h ago shows %q, want success", c)
	}
	if c := wc.Cells[colOf(t, g, hour.Add(-1*time.Hour))]; c != "w:" {
		t.Errorf("wordcount 1 h ago shows %q, want waiting", c)
	}
	failedAt := hour.Add(-4 * time.Hour)
	if c := rowOf(t, g, "fails").Cells[colOf(t, g, failedAt)]; c != "f:" {
		t.Errorf("fails 4 h ago shows %q, want failure", c)
	}
	if txt := eval[string](t, ctx, `document.getElementById('load-errors').textContent`); !strings.Contains(txt, "broken.json") {
		t.Errorf("load errors = %q", txt)
	}
	screenshot(t, ctx, "engine-grid.png")

	// The failed slot's details: state, external ID, trigger, the command's log.
	cell := fmt.Sprintf(`#grid .row[data-w="fails"] > :nth-child(%d)`, colOf(t, g, failedAt)+2)
	run(t, ctx, "open the failed slot", chromedp.Click(chromedp.CSS(cell)), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "fails"))))
	st := mustSlotState(t, f.eng, "fails", failedAt)
	detail := eval[string](t, ctx, `document.querySelector('#drawer .detail').innerText`)
	for _, want := range []string{"FAILURE", st.ExternalID, "0 of 0", "Always ready", "no input for " + failedAt.Format("15") + ":00"} {
		if !strings.Contains(detail, want) {
			t.Errorf("details lack %q:\n%s", want, detail)
		}
	}
	screenshot(t, ctx, "engine-slot.png")

	// Rerun it through the API: the engine resets it to WAITING.
	run(t, ctx, "rerun", chromedp.Click(chromedp.CSS(`#drawer button[data-act="rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	confirmAndReload(t, ctx)
	waitJS(t, ctx, "details after the rerun", `document.querySelector('#drawer .detail[data-status="WAITING"]')`)
	if got := mustSlotState(t, f.eng, "fails", failedAt).Status; got != slot.Waiting {
		t.Errorf("after the rerun the engine says %s, want WAITING", got)
	}
	checkGridAgainstAPI(t, ctx, srv.URL)

	// Rerun a range: shift-click selects three buckets of wordcount.
	newest, oldest := colOf(t, g, hour.Add(-3*time.Hour)), colOf(t, g, hour.Add(-5*time.Hour))
	first := fmt.Sprintf(`#grid .row[data-w="wordcount"] > :nth-child(%d)`, newest+2)
	last := fmt.Sprintf(`#grid .row[data-w="wordcount"] > :nth-child(%d)`, oldest+2)
	run(t, ctx, "select a range", chromedp.Click(chromedp.CSS(first)), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "wordcount"))))
	shiftClick(t, ctx, last)
	run(t, ctx, "range details", chromedp.WaitVisible(chromedp.CSS(drawerShows("range", "wordcount"))))
	if n := eval[int](t, ctx, `document.querySelectorAll('#grid .row > i.sel').length`); n != 3 {
		t.Errorf("%d cells selected, want 3", n)
	}
	screenshot(t, ctx, "engine-range.png")
	run(t, ctx, "rerun the range", chromedp.Click(chromedp.CSS(`#drawer button[data-act="rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	if txt := eval[string](t, ctx, `document.querySelector('#confirm').innerText`); !strings.Contains(txt, "Rerun 3 slots") {
		t.Errorf("range confirmation = %q", txt)
	}
	confirmAndReload(t, ctx)
	for h := 3; h <= 5; h++ {
		if got := mustSlotState(t, f.eng, "wordcount", hour.Add(-time.Duration(h)*time.Hour)).Status; got != slot.Waiting {
			t.Errorf("wordcount %d h ago is %s after the range rerun, want WAITING", h, got)
		}
	}
	checkGridAgainstAPI(t, ctx, srv.URL)

	// Pause from the workflow's details.
	run(t, ctx, "open the workflow", chromedp.Click(chromedp.CSS(`#grid .row[data-w="wordcount"] a.wid`)), chromedp.WaitVisible(chromedp.CSS(drawerShows("workflow", "wordcount"))))
	screenshot(t, ctx, "engine-workflow.png")
	run(t, ctx, "pause", chromedp.Click(chromedp.CSS(`#drawer button[data-act="pause"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	screenshot(t, ctx, "engine-confirm.png")
	confirmAndReload(t, ctx)
	if paused, _ := f.eng.Paused("wordcount"); !paused {
		t.Error("wordcount not paused")
	}
	if cls := eval[string](t, ctx, `document.querySelector('#grid .row[data-w="wordcount"]').className`); !strings.Contains(cls, "p") {
		t.Errorf("paused row class = %q", cls)
	}

	// The engine runs the rerun slots again on the next steps.
	f.settle(t)
	run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#grid")))
	checkGridAgainstAPI(t, ctx, srv.URL)
	if got := mustSlotState(t, f.eng, "fails", failedAt).Status; got != slot.Failure {
		t.Errorf("the rerun slot ran again and is %s, want FAILURE", got)
	}

	// Kill a slot that the pause keeps WAITING, then unpause the workflow.
	killAt := hour.Add(-4 * time.Hour)
	if got := mustSlotState(t, f.eng, "wordcount", killAt).Status; got != slot.Waiting {
		t.Fatalf("paused wordcount@%v is %s, want WAITING", killAt, got)
	}
	cell = fmt.Sprintf(`#grid .row[data-w="wordcount"] > :nth-child(%d)`, colOf(t, g, killAt)+2)
	run(t, ctx, "kill", chromedp.Click(chromedp.CSS(cell)), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "wordcount")+` button[data-act="kill"]`)),
		chromedp.Click(chromedp.CSS(`#drawer button[data-act="kill"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	if txt := eval[string](t, ctx, `document.querySelector('#confirm').innerText`); !strings.Contains(txt, "wordcount@"+slot.FormatTime(killAt)) {
		t.Errorf("kill confirmation does not name the slot: %q", txt)
	}
	confirmAndReload(t, ctx)
	if got := mustSlotState(t, f.eng, "wordcount", killAt).Status; got != slot.Killed {
		t.Errorf("after the kill the engine says %s, want KILLED", got)
	}
	waitJS(t, ctx, "details after the kill", `document.querySelector('#drawer .detail[data-status="KILLED"]')`)
	if cls := eval[string](t, ctx, `document.querySelector('`+cell+`').className`); !strings.Contains(cls, "k") {
		t.Errorf("killed cell class = %q, want k", cls)
	}
	run(t, ctx, "unpause", chromedp.Click(chromedp.CSS(`#grid .row[data-w="wordcount"] a.wid`)),
		chromedp.WaitVisible(chromedp.CSS(drawerShows("workflow", "wordcount")+` button[data-act="unpause"]`)),
		chromedp.Click(chromedp.CSS(`#drawer button[data-act="unpause"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	confirmAndReload(t, ctx)
	if paused, _ := f.eng.Paused("wordcount"); paused {
		t.Error("wordcount still paused after Unpause")
	}
	if eval[bool](t, ctx, `document.querySelector('#grid .row[data-w="wordcount"]').classList.contains('p')`) {
		t.Error("unpaused row still looks paused")
	}
	checkGridAgainstAPI(t, ctx, srv.URL)
	run(t, ctx, "close details", chromedp.Click(chromedp.CSS(`#drawer-close`)))
	screenshot(t, ctx, "engine-after.png")
}

func rowOf(t *testing.T, g gridState, id string) gridRow {
	t.Helper()
	for _, r := range g.Rows {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no row %s", id)
	return gridRow{}
}

// shiftClick clicks an element with the shift key held.
func shiftClick(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nodes, err := chromedp.Run(tctx, chromedp.Nodes(chromedp.CSS(sel)))
	if err != nil || len(nodes) == 0 {
		t.Fatalf("shift-click %s: %v", sel, err)
	}
	if err := chromedp.Do(tctx, chromedp.MouseClickNode(nodes[0], chromedp.ButtonModifiers(chromedp.ModifierShift))); err != nil {
		t.Fatalf("shift-click %s: %v", sel, err)
	}
}
