package ui

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/slot"
)

// TestBrowserUnreadableSlot: in Chromium, a slot whose state file cannot
// be read is a cell of its own in the grid (drawn, not an empty bucket;
// the grid agrees with /workflow-slots, its unreadable list included); its
// details say why; a range holding it offers its rerun, which rewrites the
// record, after which the cell shows the slot WAITING. Real engine and
// state database.
func TestBrowserUnreadableSlot(t *testing.T) {
	ctx := newBrowser(t)
	f := newUnreadableFixture(t)
	srv := uiServer(t, f.eng, func() time.Time { return f.now }, Options{Version: "test"})

	run(t, ctx, "load the grid", chromedp.Navigate(srv.URL+"/ui?cols=24"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := checkGridAgainstAPI(t, ctx, srv.URL)
	col := colOf(t, g, f.fifoTime)
	if c := rowOf(t, g, "wf").Cells[col]; c != "q:" {
		t.Fatalf("the unreadable slot's cell shows %q, want q:", c)
	}
	cell := fmt.Sprintf(`#grid .row[data-w="wf"] > :nth-child(%d)`, col+2)
	empty := fmt.Sprintf(`#grid .row[data-w="wf"] > :nth-child(%d)`, colOf(t, g, f.now.Add(-12*time.Hour))+2)
	style := func(sel string) string {
		return eval[string](t, ctx, `(() => { const s = getComputedStyle(document.querySelector('`+sel+`')); return s.backgroundColor + ' ' + s.backgroundImage.slice(0, 4); })()`)
	}
	if got, none := style(cell), style(empty); got == none || !strings.Contains(got, "url(") {
		t.Errorf("the unreadable cell is drawn as %q, an empty one as %q: want a colour and a glyph of its own", got, none)
	}
	screenshot(t, ctx, "unreadable-grid.png")

	run(t, ctx, "open the unreadable slot", chromedp.Click(chromedp.CSS(cell)))
	waitJS(t, ctx, "its details", `!document.querySelector('#drawer-body').classList.contains('loading') && document.querySelector('#drawer-body').innerText.includes('rewrites it')`)
	if txt := eval[string](t, ctx, `document.querySelector('#drawer-body').innerText`); !strings.Contains(txt, "named pipe") {
		t.Errorf("details of the unreadable slot: %q; want why", txt)
	}

	shiftClick(t, ctx, fmt.Sprintf(`#grid .row[data-w="wf"] > :nth-child(%d)`, colOf(t, g, f.fifoTime.Add(-time.Hour))+2))
	run(t, ctx, "range details", chromedp.WaitVisible(chromedp.CSS(drawerShows("range", "wf"))))
	if txt := eval[string](t, ctx, `document.querySelector('#drawer .detail').innerText`); !strings.Contains(txt, "1 unreadable") {
		t.Errorf("range details: %q; want the unreadable slot counted", txt)
	}
	screenshot(t, ctx, "unreadable-range.png")
	run(t, ctx, "rerun it", chromedp.Click(chromedp.CSS(`#drawer button[data-act="rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	if txt := eval[string](t, ctx, `document.querySelector('#confirm').innerText`); !strings.Contains(txt, slot.FormatTime(f.fifoTime)) && !strings.Contains(txt, "Rerun 1 slot") {
		t.Errorf("confirmation = %q; want the unreadable slot", txt)
	}
	confirmAndReload(t, ctx)
	if got := mustSlotState(t, f.eng, "wf", f.fifoTime).Status; got != slot.Waiting {
		t.Errorf("after the rerun the engine says %q, want WAITING", got)
	}
	g = checkGridAgainstAPI(t, ctx, srv.URL)
	if c := rowOf(t, g, "wf").Cells[col]; c != "w:" {
		t.Errorf("after the rerun the cell shows %q, want w:", c)
	}
}

// TestBrowserUnreadableSlotRerunAndKill: in Chromium, the details of a
// single slot whose state file cannot be read (a click on its cell) say
// why and offer Rerun and Kill, as a slot's details do. A rerun (after the
// confirmation) rewrites the record: the cell then shows WAITING. For a
// second unreadable slot whose job still runs, the rerun is refused with
// the server's message (kill first), and the kill stops the job and
// writes KILLED: the cell then shows KILLED. Real engine, state database
// and command service.
func TestBrowserUnreadableSlotRerunAndKill(t *testing.T) {
	ctx := newBrowser(t)
	busy := fixture.Hourly("busy")
	busy.ExternalService = fixture.Command("sleep", "300")
	busy.StartTime = time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)
	f := newUnreadableFixture(t, busy)
	busyID := slot.ID{Workflow: "busy", Time: busy.StartTime}
	ext := ""
	for i := 0; i < 5 && ext == ""; i++ {
		if err := f.eng.Step(context.Background(), f.now, []string{"busy"}); err != nil {
			t.Fatal(err)
		}
		if st := mustSlotState(t, f.eng, "busy", busyID.Time); st.Status == slot.Running {
			ext = st.ExternalID
		}
	}
	if ext == "" {
		t.Fatal("the busy slot did not start")
	}
	t.Cleanup(func() { f.cmd.Kill(context.Background(), &busy, ext) })
	// Its record is torn while its job runs.
	if err := os.WriteFile(f.stateFile("busy", busyID.Time), []byte(`{"sta`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.db.Reload(); err != nil {
		t.Fatal(err)
	}
	srv := uiServer(t, f.eng, func() time.Time { return f.now }, Options{Version: "test"})
	run(t, ctx, "load the grid", chromedp.Navigate(srv.URL+"/ui?cols=24"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := checkGridAgainstAPI(t, ctx, srv.URL)
	fifoCol, busyCol := colOf(t, g, f.fifoTime), colOf(t, g, busyID.Time)
	if c := rowOf(t, g, "wf").Cells[fifoCol]; c != "q:" {
		t.Fatalf("the FIFO slot's cell shows %q, want q:", c)
	}
	if c := rowOf(t, g, "busy").Cells[busyCol]; c != "q:" {
		t.Fatalf("the torn slot's cell shows %q, want q:", c)
	}
	details := drawerShows("slot", "wf") + ` button[data-act="rerun"][data-times="` + slot.FormatTime(f.fifoTime) + `"]`
	run(t, ctx, "open the FIFO slot", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#grid .row[data-w="wf"] > :nth-child(%d)`, fifoCol+2))),
		chromedp.WaitVisible(chromedp.CSS(details)))
	if txt := eval[string](t, ctx, `document.querySelector('#drawer-body .detail').innerText`); !strings.Contains(txt, "named pipe") || !strings.Contains(txt, "Kill") {
		t.Errorf("details of the FIFO slot: %q; want why, and a Kill button", txt)
	}
	screenshot(t, ctx, "unreadable-slot.png")
	run(t, ctx, "rerun it", chromedp.Click(chromedp.CSS(details)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	if txt := eval[string](t, ctx, `document.querySelector('#confirm').innerText`); !strings.Contains(txt, "wf@"+slot.FormatTime(f.fifoTime)) {
		t.Errorf("confirmation = %q; want the FIFO slot named", txt)
	}
	confirmAndReload(t, ctx)
	if got := mustSlotState(t, f.eng, "wf", f.fifoTime).Status; got != slot.Waiting {
		t.Errorf("after the rerun the engine says %q, want WAITING", got)
	}
	waitJS(t, ctx, "the details after the rerun", `document.querySelector('#drawer .detail[data-status="WAITING"]')`)
	g = checkGridAgainstAPI(t, ctx, srv.URL)
	if c := rowOf(t, g, "wf").Cells[fifoCol]; c != "w:" {
		t.Errorf("after the rerun the cell shows %q, want w:", c)
	}

	busyCell := fmt.Sprintf(`#grid .row[data-w="busy"] > :nth-child(%d)`, busyCol+2)
	rerun := drawerShows("slot", "busy") + ` button[data-act="rerun"]`
	run(t, ctx, "open the torn slot", chromedp.Click(chromedp.CSS(busyCell)), chromedp.WaitVisible(chromedp.CSS(rerun)))
	run(t, ctx, "rerun it", chromedp.Click(chromedp.CSS(rerun)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)), chromedp.WaitVisible(chromedp.CSS(`#confirm .cerr`)))
	if txt := eval[string](t, ctx, `document.querySelector('#confirm .cerr').innerText`); !strings.Contains(txt, ext) || !strings.Contains(txt, "kill the slot first") {
		t.Errorf("refusal shown = %q; want the server's message naming the job %s", txt, ext)
	}
	screenshot(t, ctx, "unreadable-rerun-refused.png")
	// Closing the refusal loads the details again: wait for the new ones
	// (the old are marked), not to click a button that is being replaced.
	eval[bool](t, ctx, `(document.querySelector('#drawer-body .detail').dataset.old = '1') === '1'`)
	run(t, ctx, "close the refusal", chromedp.Click(chromedp.CSS(`#confirm button[value="cancel"]`)))
	kill := drawerShows("slot", "busy") + `:not([data-old]) button[data-act="kill"]`
	waitJS(t, ctx, "the details again", `!document.querySelector('#confirm[open]') && document.querySelector('`+kill+`')`)
	run(t, ctx, "kill it", chromedp.Click(chromedp.CSS(kill)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	confirmAndReload(t, ctx)
	if st := mustSlotState(t, f.eng, "busy", busyID.Time); st.Status != slot.Killed || st.ExternalID != ext {
		t.Errorf("after the kill the engine says %+v, want KILLED with the job %s", st, ext)
	}
	if js, err := f.cmd.Status(context.Background(), &busy, ext); err != nil || js.Running {
		t.Errorf("the job after the kill: %+v %v, want it stopped", js, err)
	}
	g = checkGridAgainstAPI(t, ctx, srv.URL)
	if c := rowOf(t, g, "busy").Cells[busyCol]; c != "k:" {
		t.Errorf("after the kill the cell shows %q, want k:", c)
	}
}

// TestBrowserStandaloneSlotPageActs: the buttons of a slot's details
// opened as a page of its own (the panel's ↗ link, a shared URL), not in
// the grid's side panel, act too: here the Rerun of an unreadable slot,
// after which the page shows the slot WAITING. Real engine and state
// database.
func TestBrowserStandaloneSlotPageActs(t *testing.T) {
	ctx := newBrowser(t)
	f := newUnreadableFixture(t)
	srv := uiServer(t, f.eng, func() time.Time { return f.now }, Options{Version: "test"})
	rerun := `.detail[data-kind="slot"][data-id="wf"] button[data-act="rerun"]`
	run(t, ctx, "open the slot's page", chromedp.Navigate(srv.URL+"/ui/slot?id=wf&time="+slot.FormatTime(f.fifoTime)), chromedp.WaitVisible(chromedp.CSS(rerun)))
	run(t, ctx, "rerun it", chromedp.Click(chromedp.CSS(rerun)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(`#confirm-ok`)))); err != nil {
		t.Fatalf("confirm and reload: %v", err)
	}
	waitJS(t, ctx, "the page after the rerun", `document.readyState === 'complete' && document.querySelector('.detail[data-status="WAITING"]')`)
	if got := mustSlotState(t, f.eng, "wf", f.fifoTime).Status; got != slot.Waiting {
		t.Errorf("after the rerun the engine says %q, want WAITING", got)
	}
}
