package ui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/workflow"
)

// TestBrowserDemo runs the bundled demo (testdata/demo, what `make run`
// serves) on the real engine and command service in a temp dir, stepping
// at a simulated time until its slots settle, then checks the grid in
// chromium against the API, opens the retried flaky slot and its log, and
// reruns a slot.
func TestBrowserDemo(t *testing.T) {
	ctx := newBrowser(t)
	demoSrc, err := filepath.Abs(filepath.Join("..", "..", "testdata", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(demoSrc); err != nil {
		t.Fatalf("the demo project: %v", err)
	}
	// The demo's paths are relative to the server's working directory.
	work := t.TempDir()
	t.Chdir(work)
	now := time.Date(2026, 11, 22, 14, 6, 40, 0, time.UTC)
	start := time.Date(2026, 11, 22, 14, 3, 0, 0, time.UTC)
	src := filepath.Join(work, "demo-src")
	if err := os.CopyFS(src, os.DirFS(demoSrc)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "start.cue"), []byte(fmt.Sprintf("package demo\n\n_start: %q\n", start.Format(time.RFC3339))), 0o644); err != nil {
		t.Fatal(err)
	}
	proj, _, err := schema.Compile(src)
	if err != nil {
		t.Fatalf("compile the demo: %v", err)
	}
	for _, d := range []string{"var/db", "var/jobs"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fixture.Write(t, "var/workflows", proj) // var/workflows/demo.json
	db, err := statedb.Open("var/db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cmd, err := command.New("var/jobs", command.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{WorkflowsDir: "var/workflows", Store: db,
		Services: map[string]external.Service{workflow.ServiceCommand: cmd}, FS: trigger.NewMux("")})
	if err != nil {
		t.Fatal(err)
	}
	f := &engineFixture{eng: eng, cmd: cmd, now: now}
	f.settle(t)

	srv := uiServer(t, eng, func() time.Time { return now }, Options{SlotLog: commandLogs(cmd), Attempts: cmd, Version: "demo"})
	// Without a zoom the minutely demo opens at one minute, one slot a
	// column (at one hour, everything was in one column). This is the
	// screenshot of docs/ui.md.
	run(t, ctx, "load the demo's default view", chromedp.EmulateViewport(1280, 640), chromedp.Navigate(srv.URL+"/ui"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	if z := eval[string](t, ctx, `document.getElementById('grid').className`); z != "grid z1" {
		t.Errorf("the demo opens at %q, want zoom 1 (grid z1)", z)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#grid .row[data-w="produce"] > i.s').length`); n < 3 {
		t.Errorf("the default view shows %d successful produce slots, want one a minute since 14:03", n)
	}
	screenshot(t, ctx, "demo-initial-zoom.png")
	run(t, ctx, "load the demo's grid", chromedp.Navigate(srv.URL+"/ui?zoom=1&cols=24"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := checkGridAgainstAPI(t, ctx, srv.URL)
	var ids []string
	for _, r := range g.Rows {
		ids = append(ids, r.ID)
	}
	for _, wf := range proj.Workflows {
		if !slices.Contains(ids, wf.ID) {
			t.Errorf("demo workflow %s has no row", wf.ID)
		}
	}
	screenshot(t, ctx, "demo-grid.png")

	// flaky's 14:05 slot failed once and succeeded on the retry.
	flakyAt := time.Date(2026, 11, 22, 14, 5, 0, 0, time.UTC)
	st := mustSlotState(t, eng, "flaky", flakyAt)
	if st.Status != slot.Success || st.RetryCount < 1 {
		t.Fatalf("flaky@14:05 is %s after %d retries, want SUCCESS after a retry", st.Status, st.RetryCount)
	}
	cell := fmt.Sprintf(`#grid .row[data-w="flaky"] > :nth-child(%d)`, colOf(t, g, flakyAt)+2)
	run(t, ctx, "open flaky", chromedp.Click(chromedp.CSS(cell)), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "flaky"))))
	detail := eval[string](t, ctx, `document.querySelector('#drawer .detail').innerText`)
	for _, want := range []string{"SUCCESS", st.ExternalID, fmt.Sprintf("%d of 2", st.RetryCount), "retry of 14:05 succeeded"} {
		if !strings.Contains(detail, want) {
			t.Errorf("flaky details lack %q:\n%s", want, detail)
		}
	}
	// Every attempt is listed: the first failed (exit 1), the retry
	// succeeded; each has its own log.
	waitJS(t, ctx, "the attempts of flaky", `document.querySelectorAll('#drawer li.attempt').length === 2`)
	attempts := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#drawer li.attempt')).map(li => li.innerText)`)
	for i, want := range [][]string{{"#1", "exit 1", "submitted 20", "started 20", "ended 20", "flaky@20261122T140500Z."}, {"#2", "exit 0", "the slot's current run", st.ExternalID}} {
		for _, w := range want {
			if !strings.Contains(attempts[i], w) {
				t.Errorf("attempt %d lacks %q:\n%s", i+1, w, attempts[i])
			}
		}
	}
	firstLog := eval[string](t, ctx, `document.querySelector('#drawer li.attempt a.alog').href`)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	logText, err := chromedp.Run(tctx, chromedp.Evaluate[string](`fetch(document.querySelector('#drawer li.attempt a.alog').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetch the first attempt's log: %v", err)
	}
	if !strings.Contains(logText, "first attempt of 14:05 fails on purpose") {
		t.Errorf("the first attempt's log (%s) = %q", firstLog, logText)
	}
	screenshot(t, ctx, "demo-slot.png")

	// Rerun the report of 14:04.
	reportAt := time.Date(2026, 11, 22, 14, 4, 0, 0, time.UTC)
	if got := mustSlotState(t, eng, "report", reportAt).Status; got != slot.Success {
		t.Fatalf("report@14:04 is %s, want SUCCESS", got)
	}
	cell = fmt.Sprintf(`#grid .row[data-w="report"] > :nth-child(%d)`, colOf(t, g, reportAt)+2)
	run(t, ctx, "rerun report", chromedp.Click(chromedp.CSS(cell)), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "report")+` button[data-act="rerun"]`)),
		chromedp.Click(chromedp.CSS(`#drawer button[data-act="rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	confirmAndReload(t, ctx)
	waitJS(t, ctx, "details after the rerun", `document.querySelector('#drawer .detail[data-status="WAITING"]')`)
	checkGridAgainstAPI(t, ctx, srv.URL)
	f.settle(t)
	if got := mustSlotState(t, eng, "report", reportAt).Status; got != slot.Success {
		t.Errorf("the rerun report@14:04 is %s after the next steps, want SUCCESS", got)
	}
}
