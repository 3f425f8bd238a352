package ui

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// benchService has n hourly workflows with a stored state for every slot of
// the last 7 days (168 each), mostly SUCCESS with some of every other state.
func benchService(n int) *memService {
	m := newMem()
	end := demoNow.Truncate(time.Hour)
	statuses := []slot.Status{slot.Failure, slot.Running, slot.Ready, slot.WaitTimeout, slot.Killed}
	for w := 0; w < n; w++ {
		id := fmt.Sprintf("workflow-%04d", w)
		m.add(id, time.Hour, workflow.ServiceOozie)
		if w%50 == 0 {
			m.paused[id] = true
		}
		for i := 0; i < 168; i++ {
			t := end.Add(-time.Duration(i) * time.Hour)
			st := slot.Success
			if w%3 == 0 && (w*7+i)%41 == 0 {
				st = statuses[(w+i)%len(statuses)]
			}
			m.set(id, t, st, fmt.Sprintf("%07d-oozie-oozi-W", w*1000+i), 0)
		}
	}
	return m
}

// BenchmarkGrid renders the grid of 1,000 hourly workflows server-side: 7
// days at zoom 60 (168 columns, 168,000 cells) and the default 48 columns.
//
//	go test -run '^$' -bench Grid -benchmem ./scheduler/ui/
func BenchmarkGrid(b *testing.B) {
	svc := benchService(1000)
	h := newTestHandler(b, svc, Options{})
	for _, bc := range []struct{ name, query, enc string }{
		{"1000wf-7d-zoom60", "/ui?zoom=60&cols=168", ""},
		{"1000wf-7d-zoom60-gzip", "/ui?zoom=60&cols=168", "gzip"},
		{"1000wf-48h-zoom60", "/ui", ""},
		{"1000wf-7d-zoom1440", "/ui?zoom=1440", ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				req := httptest.NewRequest("GET", bc.query, nil)
				if bc.enc != "" {
					req.Header.Set("Accept-Encoding", bc.enc)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("status %d", rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}
