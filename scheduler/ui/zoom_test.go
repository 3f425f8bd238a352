package ui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestBucketOf checks the bucket of a time against the buckets' bounds,
// for zooms that divide a day and zooms that do not.
func TestBucketOf(t *testing.T) {
	end := time.Date(2026, 11, 22, 14, 37, 0, 0, time.UTC)
	for _, zoom := range []int{1, 7, 45, 60, 100, 1440} {
		w := newWindow(end, zoom, 20)
		for i := 0; i < w.Cols; i++ {
			s := w.bucketStart(i)
			for _, at := range []time.Time{s, s.Add(w.Zoom / 2), s.Add(w.Zoom - time.Millisecond)} {
				if got := w.bucketOf(at); got != int64(i) {
					t.Errorf("zoom %d: %v is in bucket %d, want %d", zoom, at, got, i)
				}
			}
		}
		if got := w.bucketOf(w.First.Add(w.Zoom)); got >= 0 {
			t.Errorf("zoom %d: a time after the newest bucket has index %d", zoom, got)
		}
		if got := w.bucketOf(w.Start().Add(-time.Millisecond)); got < int64(w.Cols) {
			t.Errorf("zoom %d: a time before the oldest bucket has index %d", zoom, got)
		}
	}
}

// TestGridOddZoomCells: at zoom 45 an hourly workflow's slots land in the
// buckets that hold them (one bucket in four holds none).
func TestGridOddZoomCells(t *testing.T) {
	m := newMem()
	m.add("h", time.Hour, workflow.ServiceOozie)
	for i := 0; i < 10; i++ {
		m.set("h", time.Date(2026, 11, 22, 14-i, 0, 0, 0, time.UTC), slot.Success, "x", 0)
	}
	h := newTestHandler(t, m, Options{})
	page := wantStatus(t, get(t, h, "/ui?time=2026-11-22T14:37Z&zoom=45&cols=8"), 200)
	// Buckets (newest first): 14:15 13:30 12:45 12:00 11:15 10:30 09:45
	// 09:00; the slots 14:00 … 09:00 fall in all but the first and the fifth.
	if got, want := strings.Join(rowCells(t, page, "h"), " "), ": s: s: s: : s: s: s:"; got != want {
		t.Errorf("cells = %s, want %s", got, want)
	}
	if !regexp.MustCompile(`<a href="[^"]*" class="on" aria-current="true">45m</a>`).MatchString(page) {
		t.Error("the toolbar does not show the zoom 45m as the current one")
	}
}

// TestInitialZoom: without a zoom parameter the grid opens at the zoom of
// the loaded schedules' typical interval; links then leave it out.
func TestInitialZoom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		periods []time.Duration
		want    string
	}{
		{"minutely", []time.Duration{time.Minute, time.Minute, time.Minute, 5 * time.Minute, 5 * time.Minute}, "z1"},
		{"five-minutely", []time.Duration{5 * time.Minute}, "z5"},
		{"hourly", []time.Duration{time.Hour, time.Hour, time.Minute}, "z60"},
		{"daily", []time.Duration{24 * time.Hour, 24 * time.Hour}, "z1440"},
		{"none", nil, "z60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem()
			for i, p := range tc.periods {
				m.add(string(rune('a'+i)), p, workflow.ServiceOozie)
			}
			h := newTestHandler(t, m, Options{})
			page := wantStatus(t, get(t, h, "/ui"), 200)
			if !strings.Contains(page, `class="grid `+tc.want+`"`) {
				t.Errorf("the grid opens at %s, want %s", regexp.MustCompile(`class="grid (z\d+)`).FindStringSubmatch(page), tc.want)
			}
			if n := strings.Count(page, `<b data-t=`); n != maxColumns(atoiZoom(tc.want), DefaultColumns) {
				t.Errorf("%d columns", n)
			}
			older := regexp.MustCompile(`<a href="([^"]*)" id="nav-older"`).FindStringSubmatch(page)
			if older == nil || strings.Contains(older[1], "zoom=") {
				t.Errorf("the older link names the default zoom: %v", older)
			}
		})
	}
}

func atoiZoom(class string) int {
	n := 0
	for _, c := range strings.TrimPrefix(class, "z") {
		n = n*10 + int(c-'0')
	}
	return n
}
