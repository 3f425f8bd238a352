package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserLayout drives the real engine's grid in chromium (issue 17):
// rows grouped by project with the deploy in the header, a zoom that is not
// one of the toolbar's (45 minutes) with its cells checked against the API,
// the grid using the whole width of a wide screen, day headers that are
// not cut off, and the ISO date box.
func TestBrowserLayout(t *testing.T) {
	ctx := newBrowser(t)
	f := newEngineFixture(t)
	f.settle(t)
	deployed := time.Date(2026, 11, 22, 9, 12, 0, 0, time.UTC)
	srv := uiServer(t, f.eng, func() time.Time { return f.now }, Options{Deployment: func(file string) (Deployment, bool) {
		if file != "uitest.json" {
			return Deployment{}, false
		}
		return Deployment{Commit: "d6d8a42c0ffee", Dirty: true, At: deployed, User: "alice"}, true
	}})

	// Grouped by project, with the deploy.
	run(t, ctx, "load the grid", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(srv.URL+"/ui?zoom=60"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	groups := eval[[]string](t, ctx, `[...document.querySelectorAll('#grid section.grp')].map(g => g.dataset.group + ": " + g.querySelector('.gh').innerText.replace(/\s+/g, ' ') + " / " + [...g.querySelectorAll('.row')].map(r => r.dataset.w).join(","))`)
	if len(groups) != 1 || !strings.HasPrefix(groups[0], "uitest: ▾ uitest deployed d6d8a42 dirty · 2026-11-22 09:12 UTC · alice 2 workflows") || !strings.HasSuffix(groups[0], " / fails,wordcount") {
		t.Errorf("groups: %q", groups)
	}

	// Zoom 45: any number of minutes; the toolbar shows it as current; the
	// cells hold what the API says.
	run(t, ctx, "zoom 45", chromedp.Navigate(srv.URL+"/ui?zoom=45&cols=24"), chromedp.WaitVisible(chromedp.CSS("#grid.z45")))
	if got := eval[string](t, ctx, `document.querySelector('.seg[aria-label="Zoom"] a.on').textContent`); got != "45m" {
		t.Errorf("current zoom in the toolbar: %q", got)
	}
	g := checkGridAgainstAPI(t, ctx, srv.URL)
	if g.Zoom != 45*60 || len(g.Ticks) != 24 {
		t.Errorf("zoom %d s, %d columns", g.Zoom, len(g.Ticks))
	}
	for i, tk := range g.Ticks {
		// Midnight minus multiples of 45 minutes.
		if (86400-tk%86400)%(45*60) != 0 {
			t.Errorf("column %d starts at %s: not midnight minus a multiple of 45 min", i, time.Unix(tk, 0).UTC())
		}
	}

	// A wide screen: the grid reaches its right edge; cells grow.
	run(t, ctx, "wide screen", chromedp.EmulateViewport(2560, 900), chromedp.Navigate(srv.URL+"/ui?zoom=60"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	type box struct{ Wrap, Grid, Cell, LastRight float64 }
	b := eval[box](t, ctx, `(() => { const w = document.getElementById('gridwrap'), g = document.getElementById('grid'), c = g.querySelector('.row > i');
		const ticks = g.querySelectorAll('#ticks b'); return {wrap: w.clientWidth, grid: g.getBoundingClientRect().width, cell: c.getBoundingClientRect().width,
		lastRight: ticks[ticks.length - 1].getBoundingClientRect().right} })()`)
	if b.Cell <= 22 || b.LastRight < b.Wrap-48 || b.Grid > b.Wrap+1 {
		t.Errorf("on a 2560 px screen: gridwrap %.0f px, grid %.0f px, cell %.1f px, last column ends at %.0f px", b.Wrap, b.Grid, b.Cell, b.LastRight)
	}
	screenshot(t, ctx, "wide-grid.png")

	// No day header is cut off, also a day with one or two columns.
	for _, q := range []string{"time=2026-11-24T01:44Z&zoom=60", "time=2026-11-24T00:30Z&zoom=60", "time=2026-11-22T14:37Z&zoom=1440", "time=2026-11-22T14:37Z&zoom=45"} {
		run(t, ctx, "headers "+q, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(srv.URL+"/ui?"+q), chromedp.WaitVisible(chromedp.CSS("#grid")))
		cut := eval[[]string](t, ctx, `[...document.querySelectorAll('.spans .span')].filter(s => s.querySelector('span').textContent && s.scrollWidth > s.clientWidth + 1).map(s => s.title + ' (' + s.querySelector('span').textContent + ')')`)
		if len(cut) > 0 {
			t.Errorf("%s: headers cut off: %v", q, cut)
		}
		if got := eval[string](t, ctx, `document.querySelector('.spans .span span').textContent`); strings.HasSuffix(q, "zoom=60") && got != "24" {
			t.Errorf("%s: the first day's header is %q, want 24", q, got)
		}
	}

	// The date box is ISO 8601 and takes what a person types.
	run(t, ctx, "date box", chromedp.Navigate(srv.URL+"/ui?zoom=60"), chromedp.WaitVisible(chromedp.CSS("#timebox")))
	if got := eval[string](t, ctx, `document.getElementById('timebox').value`); got != f.now.Format("2006-01-02T15:04") {
		t.Errorf("date box shows %q", got)
	}
	eval[chromedp.Void](t, ctx, `document.getElementById('timebox').value = ''`)
	run(t, ctx, "type a date", chromedp.SendKeys(chromedp.CSS("#timebox"), "2026-11-22 10:00"+kb.Enter))
	waitPage(t, ctx, "the window of the typed date", `document.querySelector('#grid[data-end="2026-11-22T10:00:00.000Z"]') !== null`)
}
