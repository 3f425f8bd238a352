package ui

import (
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// scaleService has n hourly workflows with a stored state for every slot
// of the last hours hours (mostly SUCCESS, some of every other state).
func scaleService(n, hours int) *memService {
	m := newMem()
	end := demoNow.Truncate(time.Hour)
	statuses := []slot.Status{slot.Failure, slot.Running, slot.Ready, slot.WaitTimeout, slot.Killed}
	for w := 0; w < n; w++ {
		id := fmt.Sprintf("workflow-%05d", w)
		m.add(id, time.Hour, workflow.ServiceOozie)
		if w%50 == 0 {
			m.paused[id] = true
		}
		for i := 0; i < hours; i++ {
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

// BenchmarkGridScale is issue 18's figure: GET /ui, the default view, of
// 10,000 hourly workflows with a stored state for every slot the view
// shows (48 hours), warm (the handler has served it before). It reports
// the HTML's size and its gzipped size.
//
//	go test -run '^$' -bench GridScale -benchmem ./scheduler/ui/
func BenchmarkGridScale(b *testing.B) {
	for _, name := range []string{"1000wf-default", "10000wf-default", "10000wf-default-uncached"} {
		var n int
		fmt.Sscanf(name, "%dwf", &n)
		b.Run(name, func(b *testing.B) {
			h := newTestHandler(b, scaleService(n, 48), Options{})
			get(b, h, "/ui") // warm
			uncached := strings.HasSuffix(b.Name(), "uncached")
			hh, _ := h.(interface{ dropCaches() })
			var size int
			var body []byte
			for b.Loop() {
				if uncached && hh != nil {
					hh.dropCaches()
				}
				rec := get(b, h, "/ui")
				if rec.Code != 200 {
					b.Fatalf("status %d", rec.Code)
				}
				size, body = rec.Body.Len(), rec.Body.Bytes()
			}
			b.ReportMetric(float64(size), "html-bytes")
			cw := &countWriter{}
			gz := gzip.NewWriter(cw)
			gz.Write(body)
			gz.Close()
			b.ReportMetric(float64(cw.n), "gzip-bytes")
		})
	}
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
