package ui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestKilledIsNotAFailure: a slot killed on purpose (celos kill) does not
// make its row one "with failures"; a failure or a wait timeout does.
func TestKilledIsNotAFailure(t *testing.T) {
	m := newMem()
	at := demoNow.Truncate(time.Hour).Add(-3 * time.Hour)
	for id, st := range map[string]slot.Status{"killed": slot.Killed, "failed": slot.Failure, "timedout": slot.WaitTimeout} {
		m.add(id, time.Hour, workflow.ServiceOozie)
		m.set(id, at, st, "", 0)
	}
	h := newTestHandler(t, m, Options{})
	page := wantStatus(t, get(t, h, "/ui"), 200)
	for id, want := range map[string]bool{"killed": false, "failed": true, "timedout": true} {
		row := regexp.MustCompile(`<div class="row( x)?" data-w="` + id + `"`).FindStringSubmatch(page)
		if row == nil {
			t.Fatalf("no row %s", id)
		}
		if got := row[1] != ""; got != want {
			t.Errorf("row %s marked as failing: %v, want %v", id, got, want)
		}
	}
	if !strings.Contains(page, `<b>2</b> with failures`) {
		t.Errorf("summary: %s", regexp.MustCompile(`<div class="summary">(?s:.*?)</div>`).FindString(page))
	}
}

// TestLoadErrorPlural: one file that failed to load is "1 file", not "1
// workflows file(s)".
func TestLoadErrorPlural(t *testing.T) {
	m := newMem()
	m.add("a", time.Hour, workflow.ServiceOozie)
	m.loadErrors = []scheduler.LoadError{{File: "x.json", Error: "bad"}}
	page := wantStatus(t, get(t, newTestHandler(t, m, Options{}), "/ui"), 200)
	if !strings.Contains(page, "<b>1 file in the workflows directory failed to load</b>") || strings.Contains(page, "1 workflows") {
		t.Errorf("load error header: %s", regexp.MustCompile(`<section class="alert"(?s:.*?)</b>`).FindString(page))
	}
	m.loadErrors = append(m.loadErrors, scheduler.LoadError{File: "y.json", Error: "bad"})
	page = wantStatus(t, get(t, newTestHandler(t, m, Options{}), "/ui"), 200)
	if !strings.Contains(page, "<b>2 files in the workflows directory failed to load</b>") {
		t.Error("plural of the load error header")
	}
}

// TestDateBoxIsISO: the date box is a text field holding the window end
// in ISO 8601 (a datetime-local field shows the browser's locale, e.g.
// 11/24/2026, 01:44 AM), and it takes the forms a person types.
func TestDateBoxIsISO(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	page := wantStatus(t, get(t, h, "/ui?time=2026-11-24T01:44Z"), 200)
	if strings.Contains(page, "datetime-local") || !strings.Contains(page, `type="text" name="time" id="timebox" value="2026-11-24T01:44"`) {
		t.Errorf("date box: %s", regexp.MustCompile(`<input[^>]*name="time"[^>]*>`).FindString(page))
	}
	for _, q := range []string{"2026-11-24T01:44", "2026-11-24+01:44", "2026-11-24T01:44:00Z"} {
		if !strings.Contains(wantStatus(t, get(t, h, "/ui?time="+q), 200), `data-end="2026-11-24T01:44:00.000Z"`) {
			t.Errorf("time=%s: wrong window end", q)
		}
	}
	if !strings.Contains(wantStatus(t, get(t, h, "/ui?time=2026-11-24"), 200), `data-end="2026-11-24T00:00:00.000Z"`) {
		t.Error("a date alone is its midnight")
	}
}

// TestDayLabelsFit: a day with only a column or two in the window gets a
// label short enough for them ("24"), not "Tue 24 Nov" cut off.
func TestDayLabelsFit(t *testing.T) {
	h := newTestHandler(t, demoService(), Options{})
	page := wantStatus(t, get(t, h, "/ui?time=2026-11-24T01:44Z&zoom=60"), 200)
	spans := regexp.MustCompile(`<div class="span" style="--n:(\d+)" title="([^"]*)"><span>([^<]*)</span>`).FindAllStringSubmatch(page, -1)
	if len(spans) < 2 {
		t.Fatalf("spans: %v", spans)
	}
	if spans[0][1] != "2" || spans[0][3] != "24" || spans[0][2] != "Tuesday 24 November 2026" {
		t.Errorf("first span = %q", spans[0][1:])
	}
	if spans[1][3] != "Mon 23 Nov" {
		t.Errorf("a whole day's label = %q", spans[1][3])
	}
}
