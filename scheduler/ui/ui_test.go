package ui

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

func newTestHandler(t testing.TB, svc *memService, opts Options) http.Handler {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return demoNow }
	}
	h, err := New(svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t testing.TB, h http.Handler, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func wantStatus(t *testing.T, rec *httptest.ResponseRecorder, code int) string {
	t.Helper()
	if rec.Code != code {
		t.Fatalf("status %d, want %d; body:\n%s", rec.Code, code, rec.Body.String())
	}
	return rec.Body.String()
}

// rowCells extracts the bucket cells of a workflow's row: "class:text" each.
func rowCells(t *testing.T, page, id string) []string {
	t.Helper()
	re := regexp.MustCompile(`data-w="` + regexp.QuoteMeta(id) + `"><div class="wf">.*?</div>((?:<i[^>]*>[^<]*</i>)*)</div>`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no row for %s", id)
	}
	var out []string
	for _, c := range regexp.MustCompile(`<i(?: class=(\w+))?>([^<]*)</i>`).FindAllStringSubmatch(m[1], -1) {
		out = append(out, c[1]+":"+c[2])
	}
	return out
}

func TestGridGroupsAndRows(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{Config: demoConfig})
	page := wantStatus(t, get(t, h, "/ui"), 200)
	for _, want := range []string{
		`data-group="Ingest"`, `data-group="Reports"`, `data-group="Unlisted workflows"`,
		`<div class="row miss" data-w="report-legacy">`, `(missing)`,
		`<div class="row p" data-w="ingest-lax">`, `❚❚ paused`,
		`report-legacy.json`, `unsupported format version`,
		`<div class="row x" data-w="ingest-clicks">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Groups in config order, unlisted last and sorted.
	i1, i2, i3 := strings.Index(page, `data-group="Ingest"`), strings.Index(page, `data-group="Reports"`), strings.Index(page, `data-group="Unlisted workflows"`)
	if !(i1 < i2 && i2 < i3) {
		t.Errorf("groups out of order: %d %d %d", i1, i2, i3)
	}
	if n := len(regexp.MustCompile(`<div class="row(?: p)?(?: x)?" data-w=`).FindAllString(page, -1)); n != 7 {
		t.Errorf("%d workflow rows, want 7", n)
	}
}

func TestGridWithoutConfigIsOneGroup(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	page := wantStatus(t, get(t, h, "/ui"), 200)
	if strings.Count(page, `<section class="grp"`) != 1 || !strings.Contains(page, "All workflows") {
		t.Error("want one group, All workflows")
	}
	// Sorted ids.
	ids := regexp.MustCompile(`<div class="row[^"]*" data-w="([^"]+)"`).FindAllStringSubmatch(page, -1)
	for i := 1; i < len(ids); i++ {
		if ids[i-1][1] > ids[i][1] {
			t.Errorf("rows not sorted: %s before %s", ids[i-1][1], ids[i][1])
		}
	}
}

func TestGridCells(t *testing.T) {
	m := newMem()
	m.add("q", 15*time.Minute, workflow.ServiceOozie)
	m.add("h", time.Hour, workflow.ServiceOozie)
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// Bucket 10:00 of q: success, success, failure, running → worst failure, 4.
	m.set("q", base, slot.Success, "a", 0)
	m.set("q", base.Add(15*time.Minute), slot.Success, "b", 0)
	m.set("q", base.Add(30*time.Minute), slot.Failure, "c", 2)
	m.set("q", base.Add(45*time.Minute), slot.Running, "d", 0)
	// Bucket 09:00 of q: all success.
	for i := 0; i < 4; i++ {
		m.set("q", base.Add(-time.Hour+time.Duration(i)*15*time.Minute), slot.Success, "e", 0)
	}
	// Bucket 08:00: success, timeout, killed, ready → timeout.
	m.set("q", base.Add(-2*time.Hour), slot.Success, "", 0)
	m.set("q", base.Add(-2*time.Hour+15*time.Minute), slot.WaitTimeout, "", 0)
	m.set("q", base.Add(-2*time.Hour+30*time.Minute), slot.Killed, "", 0)
	m.set("q", base.Add(-2*time.Hour+45*time.Minute), slot.Ready, "", 0)
	m.set("h", base, slot.Success, "x", 0)
	m.set("h", base.Add(-time.Hour), slot.Killed, "y", 0)
	m.set("h", base.Add(-2*time.Hour), slot.Ready, "", 0)
	m.set("h", base.Add(-3*time.Hour), slot.Running, "z", 0)
	h := newTestHandler(t, m, Options{})
	// The window ends at 11:00 (exclusive): the newest bucket is 10:00.
	page := wantStatus(t, get(t, h, "/ui?time=2026-11-22T11:00Z&zoom=60&cols=5"), 200)
	if got, want := strings.Join(rowCells(t, page, "q"), " "), "f:4 s:4 t:4 w:4 w:4"; got != want {
		t.Errorf("q cells = %s, want %s", got, want)
	}
	if got, want := strings.Join(rowCells(t, page, "h"), " "), "s: k: r: u: w:"; got != want {
		t.Errorf("h cells = %s, want %s", got, want)
	}
	// Ticks: newest on the left.
	ticks := regexp.MustCompile(`<b data-t="(\d+)"`).FindAllStringSubmatch(page, -1)
	if len(ticks) != 5 || ticks[0][1] != fmt.Sprint(base.Unix()) || ticks[4][1] != fmt.Sprint(base.Add(-4*time.Hour).Unix()) {
		t.Errorf("ticks = %v", ticks)
	}
	// A window ending mid-bucket cuts the newest bucket at the end.
	page = wantStatus(t, get(t, h, "/ui?time=2026-11-22T10:31Z&zoom=60&cols=2"), 200)
	if got, want := strings.Join(rowCells(t, page, "q"), " "), "f:3 s:4"; got != want {
		t.Errorf("q cells ending 10:31 = %s, want %s", got, want)
	}
}

func TestGridZoomAndColumns(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	for _, tc := range []struct {
		query     string
		cols      int
		zoomClass string
	}{
		{"", 48, "z60"},
		{"zoom=1", 48, "z1"},
		{"zoom=5", 48, "z5"},
		{"zoom=15&cols=96", 96, "z15"},
		{"zoom=30", 48, "z30"},
		{"zoom=1440", 7, "z1440"},
		{"zoom=1440&cols=168", 7, "z1440"},
		{"zoom=60&cols=168", 168, "z60"},
		{"zoom=60&cols=1000", 168, "z60"},
		// Any whole number of minutes, clamped into 1..1440 (Celos's UI).
		{"zoom=45", 48, "z45"},
		{"zoom=7", 48, "z7"},
		{"zoom=0", 48, "z1"},
		{"zoom=-5", 48, "z1"},
		{"zoom=100000", 7, "z1440"},
		{"zoom=99999999999999999999", 7, "z1440"},
		{"zoom=2000&cols=168", 7, "z1440"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			page := wantStatus(t, get(t, h, "/ui?"+tc.query), 200)
			if n := strings.Count(page, `<b data-t=`); n != tc.cols {
				t.Errorf("%d columns, want %d", n, tc.cols)
			}
			if !strings.Contains(page, `class="grid `+tc.zoomClass+`"`) {
				t.Errorf("zoom class %s missing", tc.zoomClass)
			}
			if n := len(rowCells(t, page, "ingest-clicks")); n != tc.cols {
				t.Errorf("row has %d cells, want %d", n, tc.cols)
			}
		})
	}
}

func TestGridTimeForms(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	for _, q := range []string{"2026-11-20T10:00Z", "2026-11-20T10:00:00.000Z", "2026-11-20T11:00%2B01:00", "2026-11-20T10:00", "2026-11-20T10:00:00"} {
		page := wantStatus(t, get(t, h, "/ui?time="+q), 200)
		if !strings.Contains(page, `data-end="2026-11-20T10:00:00.000Z"`) {
			t.Errorf("time=%s: window end wrong", q)
		}
	}
}

func TestGridBadParameters(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	for _, q := range []string{"time=yesterday", "zoom=abc", "zoom=1.5", "cols=0", "page=0", "problems=yes", "cols=x", "zoom=60&zoom=5", "time=2026-11-22T10:00Z&time=2026-11-22T11:00Z"} {
		rec := get(t, h, "/ui?"+q)
		if rec.Code != 400 {
			t.Errorf("%s: status %d, want 400", q, rec.Code)
		}
		if !strings.Contains(rec.Body.String(), "400 Bad Request") {
			t.Errorf("%s: error page lacks the status", q)
		}
	}
}

func TestGridNavigation(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	page := wantStatus(t, get(t, h, "/ui"), 200)
	// Following now: "Newer" is disabled, "Older" goes back one window.
	if !regexp.MustCompile(`id="nav-newer" class="disabled"`).MatchString(page) {
		t.Error("newer link should be disabled when following now")
	}
	if !strings.Contains(page, `href="/ui?time=2026-11-20T14%3A37Z" id="nav-older"`) {
		t.Errorf("older link wrong:\n%s", regexp.MustCompile(`<a [^>]*nav-older[^>]*>`).FindString(page))
	}
	page = wantStatus(t, get(t, h, "/ui?time=2026-11-22T02:37Z&zoom=15"), 200)
	if !strings.Contains(page, `href="/ui?zoom=15" id="nav-newer"`) {
		t.Errorf("newer link from one window back should return to now:\n%s", regexp.MustCompile(`<a [^>]*nav-newer[^>]*>`).FindString(page))
	}
	page = wantStatus(t, get(t, h, "/ui?time=2026-11-10T00:00Z"), 200)
	if !strings.Contains(page, `href="/ui?time=2026-11-12T00%3A00Z" id="nav-newer"`) {
		t.Errorf("newer link wrong:\n%s", regexp.MustCompile(`<a [^>]*nav-newer[^>]*>`).FindString(page))
	}
	// The now marker is on the first column when following now, absent in the past.
	if !strings.Contains(get(t, h, "/ui").Body.String(), `class="now"`) {
		t.Error("no now marker")
	}
	if strings.Contains(page, `class="now"`) {
		t.Error("now marker in a past window")
	}
	// A window ending in the future marks the now column and hatches later ones.
	page = wantStatus(t, get(t, h, "/ui?time=2026-11-22T20:00Z"), 200)
	if !strings.Contains(page, `:nth-child(-n+6){--hatch:var(--future)}`) {
		t.Errorf("future columns not marked:\n%s", regexp.MustCompile(`(?s)<style>.*?</style>`).FindString(page))
	}
}

func TestWindowAlignment(t *testing.T) {
	for _, tc := range []struct {
		end   string
		zoom  int
		first string
	}{
		{"2026-11-22T14:37:00Z", 60, "2026-11-22T14:00:00Z"},
		{"2026-11-22T14:00:00Z", 60, "2026-11-22T13:00:00Z"}, // end is exclusive
		{"2026-11-22T14:00:01Z", 60, "2026-11-22T14:00:00Z"},
		{"2026-11-22T14:37:00Z", 1440, "2026-11-22T00:00:00Z"},
		{"2026-11-22T14:37:00Z", 15, "2026-11-22T14:30:00Z"},
		{"2026-11-22T14:37:30Z", 1, "2026-11-22T14:37:00Z"},
		{"1969-12-31T23:30:00Z", 60, "1969-12-31T23:00:00Z"},
		// A zoom that does not divide a day: multiples of it back from the
		// next UTC midnight (Celos's UIServlet). 14:37 is 563 min before
		// midnight; 81 steps of 7 min = 567 min: 14:33.
		{"2026-11-22T14:37:00Z", 7, "2026-11-22T14:33:00Z"},
		{"2026-11-22T14:37:00Z", 45, "2026-11-22T14:15:00Z"},
		{"2026-11-22T00:10:00Z", 45, "2026-11-22T00:00:00Z"},
		{"2026-11-22T23:59:00Z", 100, "2026-11-22T22:20:00Z"},
	} {
		end, _ := time.Parse(time.RFC3339, tc.end)
		w := newWindow(end, tc.zoom, 3)
		if got := w.First.Format(time.RFC3339); got != tc.first {
			t.Errorf("end %s zoom %d: first bucket %s, want %s", tc.end, tc.zoom, got, tc.first)
		}
		if w.Start() != w.First.Add(-2*time.Duration(tc.zoom)*time.Minute) {
			t.Errorf("start %v", w.Start())
		}
	}
}

func TestSlotDetails(t *testing.T) {
	svc := demoService()
	h := newTestHandler(t, svc, Options{HueURL: "http://hue:8888/"})
	failedAt := demoNow.Truncate(time.Hour).Add(-9 * time.Hour)
	st := mustSlotState(t, svc, "ingest-clicks", failedAt)
	body := wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-clicks&time="+slot.FormatTime(failedAt)), 200)
	for _, want := range []string{
		`data-kind="slot"`, `data-status="FAILURE"`, st.ExternalID, "2 of 2",
		`href="http://hue:8888/oozie/list_oozie_workflow/` + st.ExternalID + `/"`,
		"HDFS path file:///input/2026/11/22/05/_READY is not ready", `data-act="rerun"`, `data-act="pause"`,
		"2026-11-23 05:00:00 UTC", // wait timeout deadline
	} {
		if !strings.Contains(body, want) {
			t.Errorf("details lack %q", want)
		}
	}
	if strings.Contains(body, `data-act="kill"`) || strings.Contains(body, "<html") {
		t.Error("a final slot offers kill, or the fragment is a whole page")
	}
	// Without f=1 it is a whole page.
	if page := wantStatus(t, get(t, h, "/ui/slot?id=ingest-clicks&time="+slot.FormatTime(failedAt)), 200); !strings.Contains(page, "<html") {
		t.Error("standalone slot page is not a page")
	}
	// A bucket holding one slot shows that slot.
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-clicks&start=2026-11-22T05:00Z&end=2026-11-22T06:00Z"), 200)
	if !strings.Contains(body, `data-kind="slot"`) {
		t.Error("a one-slot bucket should show the slot")
	}
	// A running slot offers kill, not rerun; no Hue link for command slots.
	runningAt := demoNow.Truncate(time.Hour)
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-nyc&time="+slot.FormatTime(runningAt)), 200)
	if !strings.Contains(body, `data-act="kill"`) || strings.Contains(body, `data-act="rerun"`) || strings.Contains(body, "Hue") {
		t.Errorf("running command slot details wrong:\n%s", body)
	}
	if !strings.Contains(body, "does not give the UI access to command logs") {
		t.Error("no note about missing log access")
	}
	// A paused workflow offers unpause.
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-lax&time="+slot.FormatTime(runningAt)), 200)
	if !strings.Contains(body, `data-act="unpause"`) || !strings.Contains(body, "workflow paused") {
		t.Error("paused workflow details lack unpause")
	}
}

func TestSlotDetailsErrors(t *testing.T) {
	svc := demoService()
	h := newTestHandler(t, svc, Options{})
	for _, tc := range []struct {
		query string
		code  int
	}{
		{"", 400},
		{"id=ingest-clicks", 400},
		{"id=nope&time=2026-11-22T05:00Z", 404},
		{"id=ingest-clicks&time=2026-11-22T05:30Z", 404}, // not in the schedule
		{"id=ingest-clicks&time=bad", 400},
		{"id=ingest-clicks&start=2026-11-22T05:00Z", 400},
		{"id=ingest-clicks&start=2026-11-22T05:00Z&end=2026-11-22T04:00Z", 400},
		{"id=ingest-clicks&start=2026-11-01T05:00Z&end=2026-11-22T04:00Z", 400}, // more than 7 days
		{"id=a&id=b&time=2026-11-22T05:00Z", 400},
	} {
		rec := get(t, h, "/ui/slot?f=1&"+tc.query)
		if rec.Code != tc.code {
			t.Errorf("%q: status %d, want %d: %s", tc.query, rec.Code, tc.code, rec.Body.String())
		}
		if !strings.Contains(rec.Body.String(), `class="error"`) {
			t.Errorf("%q: error fragment lacks the error", tc.query)
		}
	}
}

func TestTriggerErrorShown(t *testing.T) {
	svc := demoService()
	svc.trig["ingest-clicks"] = trigger.Status{Type: "HDFSCheckTrigger", Description: "HDFS path hdfs:///in/_READY is not ready", Error: "dial tcp 10.0.0.1:8020: connection refused"}
	h := newTestHandler(t, svc, Options{})
	body := wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-clicks&time=2026-11-22T05:00Z"), 200)
	if !strings.Contains(body, "connection refused") {
		t.Error("trigger error not shown")
	}
}

func TestRangeDetails(t *testing.T) {
	svc := demoService()
	h := newTestHandler(t, svc, Options{})
	// report-hourly has 15-minute slots; 03:00-06:00 holds 12, one failed.
	body := wantStatus(t, get(t, h, "/ui/slot?f=1&id=report-hourly&start=2026-11-22T03:00Z&end=2026-11-22T06:00Z"), 200)
	if !strings.Contains(body, `data-kind="range"`) {
		t.Fatalf("not a range:\n%s", body)
	}
	failed := regexp.MustCompile(`data-act="rerun" data-id="report-hourly" data-times="([^"]*)">↻ Rerun 1 failed`).FindStringSubmatch(body)
	if failed == nil || failed[1] != "2026-11-22T04:15:00.000Z" {
		t.Errorf("rerun-failed button wrong: %v", failed)
	}
	all := regexp.MustCompile(`data-times="([^"]*)">↻ Rerun all 12 finished`).FindStringSubmatch(body)
	if all == nil || len(strings.Fields(all[1])) != 12 {
		t.Errorf("rerun-all button wrong: %v", all)
	}
	if n := strings.Count(body, `<a class="dl mono" href="/ui/slot?id=report-hourly&amp;time=`); n != 12 {
		t.Errorf("%d slots listed, want 12", n)
	}
	// The current bucket holds running and waiting slots: kill offered.
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=report-hourly&start=2026-11-22T14:00Z&end=2026-11-22T15:00Z"), 200)
	if !strings.Contains(body, "Kill 4 unfinished") {
		t.Errorf("no kill for the unfinished slots:\n%s", body)
	}
	// An empty range.
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=report-daily&start=2026-11-22T03:00Z&end=2026-11-22T06:00Z"), 200)
	if !strings.Contains(body, "No slots") {
		t.Error("empty range not explained")
	}
}

func TestWorkflowDetails(t *testing.T) {
	svc := demoService()
	svc.wfs["ingest-nyc"].Contacts = []workflow.Contact{{Name: "Data Team", Email: "data@example.com"}}
	svc.wfs["ingest-nyc"].URL = "https://wiki.example.com/ingest"
	h := newTestHandler(t, svc, Options{})
	body := wantStatus(t, get(t, h, "/ui/workflow?f=1&id=ingest-nyc"), 200)
	for _, want := range []string{`data-kind="workflow"`, "0 0 * * * ?", "hdfsCheck", "/input/${year}/${month}/${day}/${hour}/_READY", "delay", "10 min", "mailto:data@example.com", "https://wiki.example.com/ingest", `data-act="pause"`, "sh -c echo ${year}-${month}-${day}", "1 d"} {
		if !strings.Contains(body, want) {
			t.Errorf("workflow details lack %q", want)
		}
	}
	wantStatus(t, get(t, h, "/ui/workflow?f=1&id=nope"), 404)
	wantStatus(t, get(t, h, "/ui/workflow?f=1"), 400)
}

type fakeLog struct{ *strings.Reader }

func (fakeLog) Close() error { return nil }

func TestLogs(t *testing.T) {
	svc := demoService()
	at := demoNow.Truncate(time.Hour).Add(-2 * time.Hour)
	big := strings.Repeat("line of output\n", 5000) + "the last line\n"
	h := newTestHandler(t, svc, Options{SlotLog: func(ctx context.Context, w *workflow.Workflow, st slot.State) (io.ReadCloser, error) {
		if w.ID == "ingest-lax" {
			return nil, fmt.Errorf("open log: %w", fs.ErrNotExist)
		}
		if !st.ID.Time.Equal(at) {
			return nil, errors.New("wrong slot")
		}
		return fakeLog{strings.NewReader(big)}, nil
	}})
	body := wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-nyc&time="+slot.FormatTime(at)), 200)
	if !strings.Contains(body, "the last line") || !strings.Contains(body, "last 32 KiB") || !strings.Contains(body, `/ui/log?id=ingest-nyc&amp;time=`) {
		t.Error("log tail not shown")
	}
	if len(body) > 40<<10 {
		t.Errorf("details are %d bytes: the log tail is not bounded", len(body))
	}
	rec := get(t, h, "/ui/log?id=ingest-nyc&time="+slot.FormatTime(at))
	if wantStatus(t, rec, 200) != big || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Error("full log not served as text")
	}
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-lax&time="+slot.FormatTime(at)), 200)
	if !strings.Contains(body, "no log yet") {
		t.Error("missing log not explained")
	}
	wantStatus(t, get(t, h, "/ui/log?id=ingest-lax&time="+slot.FormatTime(at)), 404)
	// Oozie workflows have no command log section.
	body = wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-clicks&time="+slot.FormatTime(at)), 200)
	if strings.Contains(body, "Command log") {
		t.Error("oozie slot shows a command log")
	}
}

func TestSlotsErrorShownInRow(t *testing.T) {
	svc := demoService()
	svc.slotsErr["ingest-nyc"] = errors.New("schedule: dependent workflow ghost not found")
	h := newTestHandler(t, svc, Options{})
	page := wantStatus(t, get(t, h, "/ui"), 200)
	if !strings.Contains(page, `<div class="row rerr x" data-w="ingest-nyc">`) || !strings.Contains(page, "dependent workflow ghost not found") {
		t.Error("a workflow whose slots fail to list should show the error in its row")
	}
}

func TestStaticAndHeaders(t *testing.T) {
	hh := newTestHandler(t, demoService(), Options{})
	h := hh.(*handler)
	page := get(t, hh, "/ui")
	csp := page.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP = %q", csp)
	}
	// No asset comes from another origin.
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page.Body.String(), -1) {
		if strings.Contains(m[1], "//") {
			t.Errorf("external reference %s", m[1])
		}
	}
	for name, ct := range map[string]string{"ui.css": "text/css", "ui.js": "text/javascript", "favicon.svg": "image/svg+xml"} {
		rec := get(t, hh, "/ui/static/"+name+"?v="+h.assetVersion)
		wantStatus(t, rec, 200)
		if !strings.HasPrefix(rec.Header().Get("Content-Type"), ct) || !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %v", name, rec.Header())
		}
		if !strings.Contains(page.Body.String(), "/ui/static/"+name+"?v="+h.assetVersion) {
			t.Errorf("page does not reference %s with its version", name)
		}
	}
	if rec := get(t, hh, "/ui/static/ui.css"); !strings.Contains(rec.Header().Get("Cache-Control"), "no-cache") {
		t.Error("unversioned asset cached for long")
	}
	if rec := get(t, hh, "/ui/static/ui.css", "If-None-Match", `"`+h.assetVersion+`"`); rec.Code != 304 {
		t.Errorf("conditional GET: %d", rec.Code)
	}
	wantStatus(t, get(t, hh, "/ui/static/nope.js"), 404)
	wantStatus(t, get(t, hh, "/ui/nope"), 404)
	wantStatus(t, get(t, hh, "/uix"), 404)
	req := httptest.NewRequest("POST", "/ui", nil)
	rec := httptest.NewRecorder()
	hh.ServeHTTP(rec, req)
	if rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui: %d %v", rec.Code, rec.Header())
	}
	// /ui/ is the grid too.
	wantStatus(t, get(t, hh, "/ui/"), 200)
}

func TestGzip(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	plain := get(t, h, "/ui").Body.String()
	rec := get(t, h, "/ui", "Accept-Encoding", "gzip, deflate")
	if rec.Header().Get("Content-Encoding") != "gzip" {
		t.Fatal("not gzipped")
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(zr)
	if string(data) != plain {
		t.Error("gzipped page differs")
	}
	if get(t, h, "/ui", "Accept-Encoding", "gzip;q=0").Header().Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 honoured")
	}
}

func TestEscaping(t *testing.T) {
	svc := demoService()
	svc.loadErrors = append(svc.loadErrors, api_LoadError(`/w/<script>alert(1)</script>.json`, `bad "json" <b>here</b>`))
	h := newTestHandler(t, svc, Options{Title: `<i>prod</i>`, Config: Config{Groups: []Group{{Name: `<img src=x onerror=alert(1)>`, Workflows: []string{`"><script>x</script>`}}}}})
	page := wantStatus(t, get(t, h, "/ui"), 200)
	for _, bad := range []string{"<script>alert", "<b>here", "<img src=x", "<script>x", "<i>prod"} {
		if strings.Contains(page, bad) {
			t.Errorf("unescaped %q in page", bad)
		}
	}
}

func TestTokenRequiredFlag(t *testing.T) {
	page := wantStatus(t, get(t, newTestHandler(t, demoService(), Options{TokenRequired: true}), "/ui"), 200)
	if !strings.Contains(page, `data-token-required="true"`) || !strings.Contains(page, "This server requires one") {
		t.Error("token requirement not passed to the page")
	}
}

func TestBasePathAndAPIBase(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{BasePath: "/celos/ui/", APIBase: "/celos/"})
	page := wantStatus(t, get(t, h, "/celos/ui"), 200)
	if !strings.Contains(page, `data-base="/celos/ui" data-api="/celos"`) || !strings.Contains(page, `/celos/ui/static/ui.js`) {
		t.Error("base paths not used")
	}
	wantStatus(t, get(t, h, "/ui"), 404)
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := LoadConfig(write("ok.json", `{"groups": [{"name": "Group 1", "workflows": ["workflow-1", "workflow-2"]}, {"name": "Group 2", "workflows": ["workflow-3"]}]}`))
	if err != nil || len(c.Groups) != 2 || c.Groups[1].Workflows[0] != "workflow-3" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"syntax.json", `{"groups": [`, "unexpected EOF"},
		{"unknown.json", `{"groups": [], "colour": "red"}`, `unknown field "colour"`},
		{"noname.json", `{"groups": [{"workflows": ["a"]}]}`, "groups[0]: name is empty"},
		{"dup.json", `{"groups": [{"name": "g", "workflows": ["a", "a"]}]}`, `workflow "a" listed twice`},
		{"empty.json", `{"groups": [{"name": "g", "workflows": [""]}]}`, "empty workflow id"},
		{"trail.json", `{"groups": []} {}`, "trailing data"},
		{"blank.json", " \n", "the file is empty"},
		{"dupgroup.json", `{"groups": [{"name": "g", "workflows": ["a"]}, {"name": "g", "workflows": ["b"]}]}`, `groups[1]: name "g" is also the name of groups[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(write(tc.name, tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming the file and saying %q", err, tc.want)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing config file must be an error (as in Celos)")
	}
	if _, err := New(demoService(), Options{Config: Config{Groups: []Group{{Name: ""}}}}); err == nil {
		t.Error("New accepted an invalid config")
	}
}

func TestRelative(t *testing.T) {
	now := demoNow
	for d, want := range map[time.Duration]string{
		-30 * time.Second: "30 s ago", -5 * time.Minute: "5 min ago", -3 * time.Hour: "3 h ago",
		-90 * time.Minute: "1.5 h ago", 14*time.Hour + 24*time.Minute: "in 14.4 h", -72 * time.Hour: "3 days ago",
	} {
		if got := relative(now.Add(d), now); got != want {
			t.Errorf("relative(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestProblemsShown(t *testing.T) {
	svc := demoService()
	readyAt := demoNow.Truncate(time.Hour).Add(-3 * time.Hour)
	svc.kept = []scheduler.Problem{
		{Workflow: "ingest-impressions", Slot: readyAt, Op: "submit", Error: "oozie: 503 Service Unavailable", At: demoNow.Add(-time.Minute)},
		{Workflow: "ingest-impressions", Op: "step", Error: "workflow <b>broken</b>", At: demoNow},
	}
	h := newTestHandler(t, svc, Options{})
	page := wantStatus(t, get(t, h, "/ui"), 200)
	if !strings.Contains(page, `<span class="tag warn" title="2026-11-22 11:00 submit: oozie: 503 Service Unavailable
step: workflow &lt;b&gt;broken&lt;/b&gt;">⚠ 2</span>`) {
		t.Errorf("row lacks the problems tag:\n%s", regexp.MustCompile(`data-w="ingest-impressions".*?</div>`).FindString(page))
	}
	if !strings.Contains(page, "<b>1</b> with errors to look at") {
		t.Error("summary lacks the problems count")
	}
	body := wantStatus(t, get(t, h, "/ui/slot?f=1&id=ingest-impressions&time="+slot.FormatTime(readyAt)), 200)
	if !strings.Contains(body, "oozie: 503 Service Unavailable") || strings.Contains(body, "broken") {
		t.Error("slot details should list that slot's problems only")
	}
	body = wantStatus(t, get(t, h, "/ui/workflow?f=1&id=ingest-impressions"), 200)
	if !strings.Contains(body, "oozie: 503 Service Unavailable") || !strings.Contains(body, "workflow &lt;b&gt;broken&lt;/b&gt;") {
		t.Error("workflow details lack the problems")
	}
}

// TestServerFaultPageHidesDetail: a 500 page of the UI (here a log that
// cannot be opened) shows a reference, not the error's text (a path of
// the server's files); the Logger has the detail under that reference.
func TestServerFaultPageHidesDetail(t *testing.T) {
	svc := demoService()
	at := demoNow.Truncate(time.Hour).Add(-2 * time.Hour)
	var log servertest.LockedBuffer
	h := newTestHandler(t, svc, Options{
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		SlotLog: func(context.Context, *workflow.Workflow, slot.State) (io.ReadCloser, error) {
			return nil, errors.New("open /srv/celos/jobs/secret-dir/out.log: permission denied")
		}})
	body := wantStatus(t, get(t, h, "/ui/log?id=ingest-nyc&time="+slot.FormatTime(at)), 500)
	ref := regexp.MustCompile(`reference ([0-9a-f]{16})`).FindStringSubmatch(body)
	if strings.Contains(body, "secret-dir") || ref == nil {
		t.Fatalf("500 page: want a reference and not the error's text:\n%s", body)
	}
	if l := log.String(); !strings.Contains(l, "secret-dir") || !strings.Contains(l, ref[1]) {
		t.Errorf("the log lacks the error under reference %s:\n%s", ref[1], l)
	}
}
