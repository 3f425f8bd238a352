package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/slot"
)

// The browser tests drive Debian's chromium through chromedp against a real
// HTTP server: the API handler (scheduler/api) at the root and the UI at
// /ui, as `celos server` mounts them. They fail when chromium is missing
// (scripts/test-deps.sh installs it), unless CELOS_SKIP_BROWSER=1.

// chromiumPath finds the browser or fails the test with an install hint.
// CELOS_SKIP_BROWSER=1 is a developer's opt-out (as CELOS_SKIP_HDFS, see
// docs/testing.md): the browser tests are skipped, except in CI (CI=true),
// where the opt-out fails them.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if os.Getenv("CELOS_SKIP_BROWSER") == "1" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CELOS_SKIP_BROWSER=1 is not allowed in CI (CI=true): CI runs every browser test")
		}
		t.Skip("browser tests skipped: CELOS_SKIP_BROWSER=1")
	}
	if p := os.Getenv("CELOS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: install it with `apt-get install -y chromium` (scripts/test-deps.sh does), " +
		"point CELOS_CHROMIUM at a Chrome binary, or set CELOS_SKIP_BROWSER=1 to skip the browser tests")
	return ""
}

// artifactDir is where screenshots go: $CELOS_TEST_ARTIFACTS/ui when set
// (CI uploads it), else scheduler/ui/testdata/artifacts (git-ignored).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(pkgDir, "testdata", "artifacts")
	if d := os.Getenv("CELOS_TEST_ARTIFACTS"); d != "" {
		dir = filepath.Join(d, "ui")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pkgDir is the package directory (the tests' working directory at start;
// some tests change it).
var pkgDir, _ = os.Getwd()

// newBrowser starts a headless chromium with a fresh profile.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// Start the browser with no deadline; each step below gets its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium (%s): %v", exe, err)
	}
	return ctx
}

// run runs browser steps with a timeout, failing the test on error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		failureArtifacts(t, ctx)
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until a script expression is truthy in the page.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		failureArtifacts(t, ctx)
		t.Fatalf("%s: %v", what, err)
	}
}

// failureArtifacts saves a screenshot and logs the page's state when a
// browser step fails.
func failureArtifacts(t *testing.T, ctx context.Context) {
	t.Helper()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if buf, err := chromedp.Run(fctx, chromedp.CaptureScreenshot()); err == nil {
		p := filepath.Join(artifactDir(t), "failure-"+strings.ReplaceAll(t.Name(), "/", "_")+".png")
		if os.WriteFile(p, buf, 0o644) == nil {
			t.Logf("failure screenshot: %s", p)
		}
	}
	if state, err := chromedp.Run(fctx, chromedp.Evaluate[string](`location.href + "\n" + (document.getElementById('drawer-body') || {}).innerHTML + "\n" + (document.querySelector('dialog[open]') || {}).innerText`)); err == nil {
		t.Logf("page state at failure:\n%s", state)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	buf, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// uiServer serves the API and the UI over svc like `celos server`.
func uiServer(t *testing.T, svc scheduler.Service, now func() time.Time, opts Options) *httptest.Server {
	t.Helper()
	opts.Now = now
	u, err := New(svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", api.New(svc, api.Options{Now: now, Version: "test"}))
	mux.Handle("/ui", u)
	mux.Handle("/ui/", u)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// unreadableMark is the status apiSlots gives a slot the API lists as
// unreadable (it has none).
const unreadableMark slot.Status = "(unreadable)"

// apiSlots reads /workflow-slots as a client of the API would: its slots,
// and those it lists as unreadable with status unreadableMark.
func apiSlots(t *testing.T, base, id string, start, end time.Time) []api.Slot {
	t.Helper()
	q := url.Values{"id": {id}, "start": {slot.FormatTime(start)}, "end": {slot.FormatTime(end)}}
	res, err := http.Get(base + "/workflow-slots?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /workflow-slots %s: %s", id, res.Status)
	}
	var body struct {
		Slots      []api.Slot           `json:"slots"`
		Unreadable []api.UnreadableSlot `json:"unreadable"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	for _, u := range body.Unreadable {
		body.Slots = append(body.Slots, api.Slot{Time: u.Time, Status: unreadableMark})
	}
	return body.Slots
}

func apiWorkflows(t *testing.T, base string) []string {
	t.Helper()
	res, err := http.Get(base + "/workflow-list")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		IDs []string `json:"ids"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.IDs
}

// gridRow is a row as the browser shows it.
type gridRow struct {
	ID    string   `json:"id"`
	Class string   `json:"cls"`
	Cells []string `json:"cells"` // "class:text" per bucket
}

const readGridJS = `(() => ({
  end: document.getElementById('grid').dataset.end,
  ticks: [...document.querySelectorAll('#ticks b')].map(b => +b.dataset.t),
  zoom: +document.getElementById('grid').dataset.zoom,
  rows: [...document.querySelectorAll('#grid .row[data-w]')].map(r => ({
    id: r.dataset.w, cls: r.className,
    cells: [...r.children].slice(1).map(c => c.className.replace(/\b(sel|kb)\b/g,'').trim() + ':' + c.textContent)
  }))
}))()`

type gridState struct {
	End   string    `json:"end"`
	Ticks []int64   `json:"ticks"`
	Zoom  int64     `json:"zoom"`
	Rows  []gridRow `json:"rows"`
}

// expectCells computes what a row must show from the API's slots: per
// bucket the worst state (unreadable > failure > timeout > killed >
// running > ready > waiting > success) and the count when several.
func expectCells(slots []api.Slot, ticks []int64, zoom int64) []string {
	rank := map[slot.Status]int{slot.Success: 1, slot.Waiting: 2, slot.Ready: 3, slot.Running: 4, slot.Killed: 5, slot.WaitTimeout: 6, slot.Failure: 7, unreadableMark: 8}
	class := map[slot.Status]string{slot.Success: "s", slot.Waiting: "w", slot.Ready: "r", slot.Running: "u", slot.Killed: "k", slot.WaitTimeout: "t", slot.Failure: "f", unreadableMark: "q"}
	worst := make([]slot.Status, len(ticks))
	count := make([]int, len(ticks))
	for _, s := range slots {
		t, err := slot.ParseTime(s.Time)
		if err != nil {
			panic(err)
		}
		for i, start := range ticks {
			if t.Unix() >= start && t.Unix() < start+zoom {
				count[i]++
				if rank[s.Status] > rank[worst[i]] {
					worst[i] = s.Status
				}
			}
		}
	}
	out := make([]string, len(ticks))
	for i := range ticks {
		switch count[i] {
		case 0:
			out[i] = ":"
		case 1:
			out[i] = class[worst[i]] + ":"
		default:
			out[i] = fmt.Sprintf("%s:%d", class[worst[i]], count[i])
		}
	}
	return out
}

// checkGridAgainstAPI compares every row the browser shows with the API.
func checkGridAgainstAPI(t *testing.T, ctx context.Context, base string) gridState {
	t.Helper()
	g := eval[gridState](t, ctx, readGridJS)
	if len(g.Ticks) == 0 || g.Zoom == 0 {
		t.Fatalf("grid has no columns: %+v", g)
	}
	start := time.Unix(g.Ticks[len(g.Ticks)-1], 0)
	end, err := slot.ParseTime(g.End)
	if err != nil {
		t.Fatalf("grid data-end: %v", err)
	}
	shown := map[string]gridRow{}
	for _, r := range g.Rows {
		shown[r.ID] = r
	}
	for _, id := range apiWorkflows(t, base) {
		row, ok := shown[id]
		if !ok {
			t.Errorf("workflow %s from /workflow-list has no row in the grid", id)
			continue
		}
		want := expectCells(apiSlots(t, base, id, start, end), g.Ticks, g.Zoom)
		if strings.Join(row.Cells, " ") != strings.Join(want, " ") {
			t.Errorf("row %s:\n got %v\nwant %v", id, row.Cells, want)
		}
	}
	return g
}

func TestBrowserGridAgainstAPI(t *testing.T) {
	ctx := newBrowser(t)
	svc := demoService()
	clock := func() time.Time { return demoNow }
	srv := uiServer(t, svc, clock, Options{Config: demoConfig, HueURL: "http://hue.example.com:8888", Version: "test"})

	run(t, ctx, "load the grid", chromedp.Navigate(srv.URL+"/ui"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := checkGridAgainstAPI(t, ctx, srv.URL)

	// Groups, missing ids, the unlisted group, paused rows, load errors.
	groups := eval[[]string](t, ctx, `[...document.querySelectorAll('#grid section.grp')].map(g => g.dataset.group)`)
	if want := "Ingest,Reports,Unlisted workflows"; strings.Join(groups, ",") != want {
		t.Errorf("groups = %v, want %s", groups, want)
	}
	missing := eval[string](t, ctx, `document.querySelector('.row.miss').textContent`)
	if !strings.Contains(missing, "report-legacy") || !strings.Contains(missing, "(missing)") {
		t.Errorf("missing row = %q", missing)
	}
	for _, r := range g.Rows {
		if r.ID == "ingest-lax" && !strings.Contains(r.Class, "p") {
			t.Errorf("paused workflow ingest-lax row class = %q", r.Class)
		}
	}
	if txt := eval[string](t, ctx, `document.getElementById('load-errors').textContent`); !strings.Contains(txt, "report-legacy.json") {
		t.Errorf("load errors = %q", txt)
	}
	screenshot(t, ctx, "grid.png")

	// Click a failed slot: the details show its state, external ID, retry
	// count, the trigger tree and the Hue link.
	failedAt := demoNow.Truncate(time.Hour).Add(-9 * time.Hour)
	col := colOf(t, g, failedAt)
	cell := fmt.Sprintf(`#grid .row[data-w="ingest-clicks"] > :nth-child(%d)`, col+2)
	if cls := eval[string](t, ctx, `document.querySelector('`+cell+`').className`); cls != "f" {
		t.Fatalf("cell %s class = %q, want f", cell, cls)
	}
	run(t, ctx, "open the slot", chromedp.Click(chromedp.CSS(cell)), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "ingest-clicks"))))
	detail := eval[string](t, ctx, `document.querySelector('#drawer .detail').innerText`)
	st := mustSlotState(t, svc, "ingest-clicks", failedAt)
	for _, want := range []string{"FAILURE", st.ExternalID, "2 of 2", "HDFS path file:///input/", "Open in Hue"} {
		if !strings.Contains(detail, want) {
			t.Errorf("slot details lack %q:\n%s", want, detail)
		}
	}
	hue := eval[string](t, ctx, `document.querySelector('#drawer a.ext').href`)
	if want := "http://hue.example.com:8888/oozie/list_oozie_workflow/" + st.ExternalID + "/"; hue != want {
		t.Errorf("Hue link = %q, want %q", hue, want)
	}
	screenshot(t, ctx, "slot-details.png")

	// Rerun it: confirm, and the grid shows the new state after the reload.
	run(t, ctx, "rerun", chromedp.Click(chromedp.CSS(`#drawer button[data-act="rerun"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)))
	if txt := eval[string](t, ctx, `document.querySelector('#confirm').innerText`); !strings.Contains(txt, "ingest-clicks@"+slot.FormatTime(failedAt)) {
		t.Errorf("confirmation does not name the slot: %q", txt)
	}
	confirmAndReload(t, ctx)
	waitJS(t, ctx, "details after the rerun", `document.querySelector('#drawer .detail[data-status="WAITING"]')`)
	if cls := eval[string](t, ctx, `document.querySelector('`+cell+`').className`); !strings.Contains(cls, "w") {
		t.Errorf("after rerun the cell's class is %q, want w (waiting)", cls)
	}
	if got := mustSlotState(t, svc, "ingest-clicks", failedAt).Status; got != slot.Waiting {
		t.Errorf("after rerun the API says %s, want WAITING", got)
	}
	checkGridAgainstAPI(t, ctx, srv.URL)
	screenshot(t, ctx, "after-rerun.png")

	// For the eyes of whoever reviews the artifacts: the grid as a reader
	// with deuteranopia sees it (states must stay apart by glyph and
	// lightness), and the dark theme.
	run(t, ctx, "close details", chromedp.Click(chromedp.CSS(`#drawer-close`)))
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedVisionDeficiency, emulation.SetEmulatedVisionDeficiencyParams{Type: emulation.SetEmulatedVisionDeficiencyTypeDeuteranopia}); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "grid-deuteranopia.png")
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedVisionDeficiency, emulation.SetEmulatedVisionDeficiencyParams{Type: "none"}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	if bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg == "rgb(246, 247, 249)" {
		t.Errorf("dark theme not applied: body background %s", bg)
	}
	screenshot(t, ctx, "grid-dark.png")

	// The keyboard: the grid is one tab stop, the arrows move a cursor over
	// the cells and Enter opens the cell under it.
	run(t, ctx, "focus the grid", chromedp.Focus(chromedp.CSS("#grid")))
	cursorJS := `(() => { const c = document.querySelector('#grid .row > i.kb'); return c ? c.parentElement.dataset.w + '/' + ([...c.parentElement.children].indexOf(c) - 1) : ''; })()`
	if got := eval[string](t, ctx, cursorJS); got != "ingest-clicks/0" {
		t.Errorf("cursor on focus = %q, want ingest-clicks/0 (the first cell)", got)
	}
	run(t, ctx, "arrow keys", chromedp.KeyEvent(kb.ArrowUp), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowLeft))
	if got := eval[string](t, ctx, cursorJS); got != "ingest-impressions/2" {
		t.Errorf("cursor after Up, Down, Right×3, Left = %q, want ingest-impressions/2", got)
	}
	run(t, ctx, "Enter opens the cell", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "ingest-impressions"))))
	want := "ingest-impressions@" + slot.FormatTime(time.Unix(g.Ticks[2], 0))
	if txt := eval[string](t, ctx, `document.querySelector('#drawer .detail').innerText`); !strings.Contains(txt, want) {
		t.Errorf("details opened by Enter do not show %s:\n%s", want, txt)
	}
	// Shift+Enter selects the range from the cell Enter opened.
	run(t, ctx, "Shift+Enter selects a range", chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(kb.ModifierShift)),
		chromedp.WaitVisible(chromedp.CSS(drawerShows("range", "ingest-impressions"))))
	if n := eval[int](t, ctx, `document.querySelectorAll('#grid .row[data-w="ingest-impressions"] > i.sel').length`); n != 3 {
		t.Errorf("Shift+Enter selected %d cells, want 3", n)
	}
	screenshot(t, ctx, "keyboard.png")
	// A mouse click puts the cursor where it clicks (and not on the first
	// cell, which the focus alone would choose).
	eval[bool](t, ctx, `(document.activeElement.blur(), true)`)
	run(t, ctx, "click after the keys", chromedp.Click(chromedp.CSS(`#grid .row[data-w="ingest-nyc"] > :nth-child(7)`)),
		chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "ingest-nyc"))))
	if got := eval[string](t, ctx, cursorJS); got != "ingest-nyc/5" {
		t.Errorf("cursor after a click on ingest-nyc's 6th cell = %q, want ingest-nyc/5", got)
	}
}

// drawerShows is the selector of the details panel once it shows the
// details of kind ("slot", "range", "workflow") of workflow id. Waiting on
// "#drawer button[...]" alone is a race: while the new details load, the
// panel still holds the previous ones, with their own buttons.
func drawerShows(kind, id string) string {
	return fmt.Sprintf(`#drawer-body:not(.loading) .detail[data-kind=%q][data-id=%q]`, kind, id)
}

// confirmAndReload clicks the confirmation dialog's button and waits for
// the page to reload with the new state.
func confirmAndReload(t *testing.T, ctx context.Context) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(`#confirm-ok`)))); err != nil {
		t.Fatalf("confirm and reload: %v", err)
	}
	// After a reload the page started itself, wait with a script rather
	// than a DOM query: chromedp's node tree may still be the old page's.
	waitJS(t, ctx, "grid after reload", `document.readyState === 'complete' && document.getElementById('grid')`)
}

func colOf(t *testing.T, g gridState, at time.Time) int {
	t.Helper()
	for i, tk := range g.Ticks {
		if at.Unix() >= tk && at.Unix() < tk+g.Zoom {
			return i
		}
	}
	t.Fatalf("%v is not in the grid's window", at)
	return 0
}

func mustSlotState(t *testing.T, svc scheduler.Service, id string, at time.Time) slot.State {
	t.Helper()
	sl, err := svc.Slots(context.Background(), id, at, at.Add(time.Second))
	if err != nil || len(sl) != 1 {
		t.Fatalf("slot %s@%v: %v %v", id, at, sl, err)
	}
	return sl[0].State
}

// TestBrowserToken checks that actions carry the operator's token: the API
// here refuses POSTs without "Authorization: Bearer s3cret" (as the
// reliability work will make `celos server` do); the page asks for the
// token, keeps it, and retries.
func TestBrowserToken(t *testing.T) {
	ctx := newBrowser(t)
	svc := demoService()
	clock := func() time.Time { return demoNow }
	u, err := New(svc, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	apiH := api.New(svc, api.Options{Now: clock})
	var authorized []string
	mux := http.NewServeMux()
	mux.Handle("/ui", u)
	mux.Handle("/ui/", u)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"error": "missing or wrong bearer token"}`))
				return
			}
			authorized = append(authorized, r.URL.Path+"?"+r.URL.RawQuery)
		}
		apiH.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	run(t, ctx, "load the grid", chromedp.Navigate(srv.URL+"/ui"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := eval[gridState](t, ctx, readGridJS)
	failedAt := demoNow.Truncate(time.Hour).Add(-10 * time.Hour)
	cell := fmt.Sprintf(`#grid .row[data-w="ingest-clicks"] > :nth-child(%d)`, colOf(t, g, failedAt)+2)
	run(t, ctx, "open and rerun",
		chromedp.Click(chromedp.CSS(cell)),
		chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "ingest-clicks")+` button[data-act="rerun"]`)),
		chromedp.Click(chromedp.CSS(`#drawer button[data-act="rerun"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#tokendlg[open]`)),
	)
	if txt := eval[string](t, ctx, `document.querySelector('#tokendlg').innerText`); !strings.Contains(txt, "missing or wrong bearer token") {
		t.Errorf("token dialog does not say why: %q", txt)
	}
	run(t, ctx, "enter the token",
		chromedp.SendKeys(chromedp.CSS(`#token-input`), "s3cret"),
		chromedp.Click(chromedp.CSS(`#tokendlg button[value="save"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
	)
	confirmAndReload(t, ctx)
	if got := mustSlotState(t, svc, "ingest-clicks", failedAt).Status; got != slot.Waiting {
		t.Errorf("after the rerun with a token the slot is %s, want WAITING", got)
	}
	if len(authorized) != 1 || !strings.HasPrefix(authorized[0], "/rerun?") {
		t.Errorf("authorized POSTs = %v", authorized)
	}
	// The token is kept: the next action goes through at once.
	run(t, ctx, "pause with the kept token",
		chromedp.Click(chromedp.CSS(`#grid .row[data-w="ingest-nyc"] a.wid`)),
		chromedp.WaitVisible(chromedp.CSS(drawerShows("workflow", "ingest-nyc")+` button[data-act="pause"]`)),
		chromedp.Click(chromedp.CSS(`#drawer button[data-act="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
	)
	confirmAndReload(t, ctx)
	if p, _ := svc.Paused("ingest-nyc"); !p {
		t.Error("ingest-nyc not paused")
	}
	if eval[string](t, ctx, `document.getElementById('token-btn').className`) != "ghost set" {
		t.Error("the token button does not show that a token is kept")
	}
}

// TestBrowserErrorsShown checks that a refused action shows the API's error
// in the dialog and changes nothing.
func TestBrowserErrorsShown(t *testing.T) {
	ctx := newBrowser(t)
	svc := demoService()
	clock := func() time.Time { return demoNow }
	srv := uiServer(t, svc, clock, Options{})
	run(t, ctx, "load the grid", chromedp.Navigate(srv.URL+"/ui"), chromedp.WaitVisible(chromedp.CSS("#grid")))
	g := eval[gridState](t, ctx, readGridJS)
	// A running slot offers kill; make it final behind the page's back so
	// the API refuses the kill (400, illegal transition).
	runningAt := demoNow.Truncate(time.Hour).Add(-time.Hour)
	cell := fmt.Sprintf(`#grid .row[data-w="ingest-clicks"] > :nth-child(%d)`, colOf(t, g, runningAt)+2)
	run(t, ctx, "open the running slot", chromedp.Click(chromedp.CSS(cell)), chromedp.WaitVisible(chromedp.CSS(drawerShows("slot", "ingest-clicks")+` button[data-act="kill"]`)))
	svc.set("ingest-clicks", runningAt, slot.Success, "x", 0)
	run(t, ctx, "kill", chromedp.Click(chromedp.CSS(`#drawer button[data-act="kill"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)), chromedp.WaitVisible(chromedp.CSS(`#confirm .cerr`)))
	if txt := eval[string](t, ctx, `document.querySelector('#confirm .cerr').innerText`); !strings.Contains(txt, "illegal slot transition") {
		t.Errorf("error shown = %q", txt)
	}
	screenshot(t, ctx, "action-error.png")
	if got := mustSlotState(t, svc, "ingest-clicks", runningAt).Status; got != slot.Success {
		t.Errorf("slot changed to %s", got)
	}
}

// TestBrowserLargeGrid loads 1,000 workflows × 168 buckets: the page shows
// one page of rows, makes no request per cell, goes to the next page from
// the keyboard, filters every workflow on the server, and opens details.
func TestBrowserLargeGrid(t *testing.T) {
	ctx := newBrowser(t)
	svc := benchService(1000)
	clock := func() time.Time { return demoNow }
	srv := uiServer(t, svc, clock, Options{})
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := chromedp.Do(lctx, chromedp.Navigate(srv.URL+"/ui?cols=168"), chromedp.WaitVisible(chromedp.CSS("#grid"))); err != nil {
		t.Fatalf("load the large grid: %v", err)
	}
	t.Logf("navigate + visible: %v", time.Since(start))
	type perf struct {
		Resources []string `json:"resources"`
		DOM       float64  `json:"dom"`
		Load      float64  `json:"load"`
		Rows      int      `json:"rows"`
		Cells     int      `json:"cells"`
		Pager     string   `json:"pager"`
	}
	p := eval[perf](t, ctx, `(() => { const n = performance.getEntriesByType('navigation')[0]; return {
		resources: performance.getEntriesByType('resource').map(r => r.name.replace(location.origin, '')),
		dom: n.domContentLoadedEventEnd, load: n.loadEventEnd,
		rows: document.querySelectorAll('#grid .row[data-w]').length,
		cells: document.querySelectorAll('#grid .row > i').length,
		pager: document.querySelector('.summary .pinfo').textContent } })()`)
	t.Logf("1,000 workflows × 168 columns in chromium: DOMContentLoaded %.0f ms, load %.0f ms, %d rows, %d cells, requests besides the page: %v", p.DOM, p.Load, p.Rows, p.Cells, p.Resources)
	// One page: the rows a person sees, not 1,000.
	if p.Rows == 0 || p.Rows > pageLines || p.Cells != p.Rows*168 || p.Pager != fmt.Sprintf("1–%d of 1000 · page 1 of 21", p.Rows) {
		t.Errorf("%d rows, %d cells, pager %q; want one page of at most %d rows", p.Rows, p.Cells, p.Pager, pageLines)
	}
	if len(p.Resources) > 3 {
		t.Errorf("the page made %d requests besides itself: %v", len(p.Resources), p.Resources)
	}
	// The keyboard goes on to the next page: PageDown on the last row.
	run(t, ctx, "keyboard to the last row", chromedp.Focus(chromedp.CSS("#grid")))
	for range 6 {
		run(t, ctx, "PageDown", chromedp.KeyEvent(kb.PageDown))
	}
	waitPage(t, ctx, "page 2 after PageDown on the last row", `document.querySelector('#grid[data-page="2"]') !== null`)
	// The filter searches every workflow, on the server.
	run(t, ctx, "filter", chromedp.SendKeys(chromedp.CSS("#filter"), "workflow-09"+kb.Enter))
	waitPage(t, ctx, "the filtered view", `document.querySelector('#grid[data-filter="workflow-09"][data-page="1"]') !== null`)
	if got := eval[string](t, ctx, `document.querySelector('.summary .pinfo').textContent`); !strings.HasSuffix(got, " of 100 · page 1 of 3") {
		t.Errorf("the filter's pager: %q, want 100 rows", got)
	}
	ids := eval[[]string](t, ctx, `[...document.querySelectorAll('#grid .row[data-w]')].map(r => r.dataset.w)`)
	for _, id := range ids {
		if !strings.HasPrefix(id, "workflow-09") {
			t.Errorf("the filter shows %s", id)
		}
	}
	run(t, ctx, "problems only", chromedp.Click(chromedp.CSS("#problems")))
	waitPage(t, ctx, "the problems view", `document.querySelector('#grid[data-filter="workflow-09|problems"]') !== null`)
	shown := eval[[]string](t, ctx, `[...document.querySelectorAll('#grid .row[data-w]')].map(r => r.className + " " + r.dataset.w)`)
	for _, c := range shown {
		if !strings.Contains(c, "x") || !strings.Contains(c, "workflow-09") {
			t.Errorf("problems only (with the filter) shows a row %q", c)
		}
	}
	if len(shown) == 0 || len(shown) >= 100 {
		t.Errorf("problems only shows %d rows", len(shown))
	}
	run(t, ctx, "open a slot", chromedp.Click(chromedp.CSS(`#grid .row[data-w] > :nth-child(5)`)), chromedp.WaitVisible(chromedp.CSS(`#drawer .detail`)))
	screenshot(t, ctx, "large-grid.png")
	// Clear the filter for the next test run in this browser profile.
	eval[chromedp.Void](t, ctx, `sessionStorage.clear()`)
}

// waitPage waits until expr is true on the page the browser shows after a
// navigation the page itself started (a link, a form): each try is a
// fresh evaluation, and the errors of a document being replaced are
// retried, for at most a minute.
func waitPage(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(tctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	failureArtifacts(t, ctx)
	t.Fatalf("%s: not true after a minute (last error: %v): %s", what, last, expr)
}
