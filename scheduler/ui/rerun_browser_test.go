package ui

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestBrowserRerunRefused: the rerun button of a slot the engine no longer
// accepts a rerun of (the workflow's startTime moved past it while the page
// was open) shows the API's refusal in the dialog, and the slot stays as it
// was.
func TestBrowserRerunRefused(t *testing.T) {
	ctx := newBrowser(t)
	f := newEngineFixture(t)
	f.settle(t)
	clock := func() time.Time { return f.now }
	srv := uiServer(t, f.eng, clock, Options{SlotLog: commandLogs(f.cmd), Version: "test"})
	run(t, ctx, "load the grid", chromedp.Navigate(srv.URL+"/ui?cols=24"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := eval[gridState](t, ctx, readGridJS)
	failedAt := f.now.Truncate(time.Hour).Add(-4 * time.Hour)
	cell := fmt.Sprintf(`#grid .row[data-w="fails"] > :nth-child(%d)`, colOf(t, g, failedAt)+2)
	run(t, ctx, "open the failed slot", chromedp.Click(chromedp.CSS(cell)),
		chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "fails")+` button[data-act="rerun"]`)))

	// Behind the page's back, the workflow now starts after the slot.
	name, err := f.eng.WorkflowFile("fails")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(f.workflows, name)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := workflow.Load(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	newStart := failedAt.Add(time.Hour)
	for i := range p.Workflows {
		if p.Workflows[i].ID == "fails" {
			p.Workflows[i].StartTime = newStart
		}
	}
	if data, err = p.Marshal(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.eng.ClearCache(); err != nil {
		t.Fatal(err)
	}

	run(t, ctx, "rerun", chromedp.Click(chromedp.CSS(`#drawer button[data-act="rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)), chromedp.WaitVisible(chromedp.CSS(`#confirm .cerr`)))
	want := "rerun refused: fails@" + slot.FormatTime(failedAt) + " is before the workflow's startTime " + slot.FormatTime(newStart)
	if txt := eval[string](t, ctx, `document.querySelector('#confirm .cerr').innerText`); !strings.Contains(txt, want) {
		t.Errorf("error shown = %q, want it to contain %q", txt, want)
	}
	screenshot(t, ctx, "rerun-refused.png")
	// (Slots no longer lists it: it is before startTime; its record stays.)
	if st, err := f.eng.SlotState(ctx, slot.ID{Workflow: "fails", Time: failedAt}); err != nil || st.Status != slot.Failure {
		t.Errorf("slot after the refused rerun: %+v %v, want FAILURE", st, err)
	}
}
