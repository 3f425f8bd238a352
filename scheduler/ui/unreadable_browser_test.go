package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

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
