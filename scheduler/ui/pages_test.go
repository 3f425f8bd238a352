package ui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

var (
	rowRe   = regexp.MustCompile(`<div class="row[^"]*" data-w="([^"]+)"`)
	groupRe = regexp.MustCompile(`<section class="grp" data-group="([^"]*)">`)
)

func shownRows(page string) []string {
	var ids []string
	for _, m := range rowRe.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestGridPages: a view holds at most pageLines rows and group headers;
// the pager walks through every row once, in order; a group cut by a page
// is continued on the next; the summary counts every workflow.
func TestGridPages(t *testing.T) {
	m := newMem()
	var ingest, reports []string
	for i := range 130 {
		id := fmt.Sprintf("wf-%03d", i)
		m.add(id, time.Hour, workflow.ServiceOozie)
		if i%10 == 0 {
			m.set(id, demoNow.Truncate(time.Hour).Add(-2*time.Hour), slot.Failure, "", 0)
		}
		if i < 70 {
			ingest = append(ingest, id)
		} else {
			reports = append(reports, id)
		}
	}
	h := newTestHandler(t, m, Options{Config: Config{Groups: []Group{{Name: "Ingest", Workflows: ingest}, {Name: "Reports", Workflows: reports}}}})
	var all []string
	next := "/ui"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("more than 5 pages of 130 rows")
		}
		page := wantStatus(t, get(t, h, strings.ReplaceAll(next, "&amp;", "&")), 200)
		rows, groups := shownRows(page), groupRe.FindAllStringSubmatch(page, -1)
		if len(rows)+len(groups) > pageLines {
			t.Errorf("page %d: %d rows and %d headers, over %d lines", pages+1, len(rows), len(groups), pageLines)
		}
		if !strings.Contains(page, `<b>130</b> workflows`) || !strings.Contains(page, `<b>13</b> with failures`) {
			t.Errorf("page %d: the summary does not count every workflow", pages+1)
		}
		if !strings.Contains(page, fmt.Sprintf("%d–%d of 130 · page %d of 3", len(all)+1, len(all)+len(rows), pages+1)) {
			t.Errorf("page %d: pager %q", pages+1, regexp.MustCompile(`<span class="pinfo">[^<]*`).FindString(page))
		}
		if pages == 1 && !regexp.MustCompile(`data-group="Ingest">\s*<div class="gh">.*?<span class="gname">Ingest</span>.*?\(continued\).*?70 workflows`).MatchString(page) {
			t.Errorf("page 2 does not continue the group Ingest")
		}
		all = append(all, rows...)
		next = ""
		if m := regexp.MustCompile(`<a href="([^"]*)" class="page-next"`).FindStringSubmatch(page); m != nil {
			next = m[1]
		}
	}
	if got, want := strings.Join(all, " "), strings.Join(append(ingest, reports...), " "); got != want {
		t.Errorf("the pages' rows:\n%s\nwant\n%s", got, want)
	}
	// A page past the last is the last.
	if got := shownRows(wantStatus(t, get(t, h, "/ui?page=99"), 200)); got[len(got)-1] != "wf-129" {
		t.Errorf("page 99 ends with %s", got[len(got)-1])
	}
}

// TestGridServerFilters: q and problems filter every workflow on the
// server, before paging; the pager and links keep them.
func TestGridServerFilters(t *testing.T) {
	m := newMem()
	for i := range 300 {
		id := fmt.Sprintf("wf-%03d", i)
		m.add(id, time.Hour, workflow.ServiceOozie)
		if i%25 == 0 {
			m.set(id, demoNow.Truncate(time.Hour).Add(-2*time.Hour), slot.WaitTimeout, "", 0)
		}
	}
	h := newTestHandler(t, m, Options{})
	page := wantStatus(t, get(t, h, "/ui?q=WF-12"), 200)
	if got := strings.Join(shownRows(page), " "); got != "wf-120 wf-121 wf-122 wf-123 wf-124 wf-125 wf-126 wf-127 wf-128 wf-129" {
		t.Errorf("q=WF-12 shows %s", got)
	}
	if !strings.Contains(page, `value="WF-12"`) || !strings.Contains(page, `data-paged="1"`) {
		t.Error("the filter box does not hold the server's filter")
	}
	page = wantStatus(t, get(t, h, "/ui?problems=1&zoom=15"), 200)
	if got := strings.Join(shownRows(page), " "); got != "wf-000 wf-025 wf-050 wf-075 wf-100 wf-125 wf-150 wf-175 wf-200 wf-225 wf-250 wf-275" {
		t.Errorf("problems=1 shows %s", got)
	}
	older := regexp.MustCompile(`<a href="([^"]*)" id="nav-older"`).FindStringSubmatch(page)
	if older == nil || !strings.Contains(older[1], "problems=1") || !strings.Contains(older[1], "zoom=15") {
		t.Errorf("the older link drops the filter: %v", older)
	}
	if !strings.Contains(page, `<input type="hidden" name="problems" value="1">`) {
		t.Error("the date box's form drops the filter")
	}
	if !strings.Contains(wantStatus(t, get(t, h, "/ui?q=nothing-like-this"), 200), "No workflow matches the filter.") {
		t.Error("an empty filtered view is not explained")
	}
}

// TestGridPageSize: the default view of a large installation is under
// 60 KB of HTML whatever the number of workflows (issue 18).
func TestGridPageSize(t *testing.T) {
	h := newTestHandler(t, scaleService(2000, 48), Options{})
	rec := get(t, h, "/ui")
	body := wantStatus(t, rec, 200)
	if n := len(body); n >= 60<<10 {
		t.Errorf("the default view of 2,000 workflows is %d bytes of HTML, want < 60 KB", n)
	}
	if n := len(shownRows(body)); n == 0 || n > pageLines {
		t.Errorf("%d rows shown", n)
	}
}

// TestGridShownRowsAreFresh: with many workflows the counts are cached
// for a few seconds, but a row a page shows is read again: a failure that
// appeared since the last view shows at once, in the row and the summary.
func TestGridShownRowsAreFresh(t *testing.T) {
	m := scaleService(300, 48)
	h := newTestHandler(t, m, Options{})
	before := wantStatus(t, get(t, h, "/ui?q=workflow-00001"), 200)
	if strings.Contains(before, `class="row x" data-w="workflow-00001"`) {
		t.Fatal("workflow-00001 fails already")
	}
	failing := regexp.MustCompile(`<b>(\d+)</b> with failures`).FindStringSubmatch(before)
	m.set("workflow-00001", demoNow.Truncate(time.Hour).Add(-time.Hour), slot.Failure, "", 0)
	after := wantStatus(t, get(t, h, "/ui?q=workflow-00001"), 200)
	if !strings.Contains(after, `class="row x" data-w="workflow-00001"`) {
		t.Error("the shown row does not show its new failure")
	}
	var n0, n1 int
	fmt.Sscan(failing[1], &n0)
	fmt.Sscan(regexp.MustCompile(`<b>(\d+)</b> with failures`).FindStringSubmatch(after)[1], &n1)
	if n1 != n0+1 {
		t.Errorf("with failures: %d, then %d", n0, n1)
	}
}
