package ui

import (
	"fmt"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// demoNow is the fixed clock of the fake data set.
var demoNow = time.Date(2026, 11, 22, 14, 37, 0, 0, time.UTC)

// demoConfig groups the fake data set like an installation would.
var demoConfig = Config{Groups: []Group{
	{Name: "Ingest", Workflows: []string{"ingest-clicks", "ingest-impressions", "ingest-lax", "ingest-nyc"}},
	{Name: "Reports", Workflows: []string{"report-daily", "report-hourly", "report-legacy"}},
}}

// demoService is a small installation: hourly ingest workflows (some
// failing, one running late, one paused), a 15-minute workflow, a daily
// report, an unlisted workflow and a file that failed to load.
func demoService() *memService {
	m := newMem()
	hour := time.Hour
	end := demoNow.Truncate(time.Hour)
	fill := func(id string, period time.Duration, back int, f func(i int, t time.Time) (slot.Status, string, int)) {
		last := demoNow.Truncate(period)
		if period == hour {
			last = end
		}
		for i := 0; i < back; i++ {
			t := last.Add(-time.Duration(i) * period)
			st, ext, retry := f(i, t)
			if st == "" {
				continue
			}
			m.set(id, t, st, ext, retry)
		}
	}
	oozieID := func(t time.Time) string {
		return fmt.Sprintf("%07d-%s-oozie-oozi-W", t.Unix()/3600%10000000, t.Format("060102150405"))
	}
	m.add("ingest-clicks", hour, workflow.ServiceOozie)
	fill("ingest-clicks", hour, 72, func(i int, t time.Time) (slot.Status, string, int) {
		switch {
		case i == 0:
			return "", "", 0
		case i == 1:
			return slot.Running, oozieID(t), 0
		case i == 9 || i == 10:
			return slot.Failure, oozieID(t), 2
		}
		return slot.Success, oozieID(t), 0
	})
	m.add("ingest-impressions", hour, workflow.ServiceOozie)
	fill("ingest-impressions", hour, 72, func(i int, t time.Time) (slot.Status, string, int) {
		switch {
		case i < 3:
			return "", "", 0
		case i == 3:
			return slot.Ready, "", 0
		case i == 30:
			return slot.WaitTimeout, "", 0
		}
		return slot.Success, oozieID(t), 0
	})
	m.add("ingest-nyc", hour, workflow.ServiceCommand)
	fill("ingest-nyc", hour, 72, func(i int, t time.Time) (slot.Status, string, int) {
		switch {
		case i == 0:
			return slot.Running, "cmd-" + t.Format("20060102T1504"), 0
		case i == 5:
			return slot.Success, "cmd-" + t.Format("20060102T1504"), 1
		case i == 20:
			return slot.Killed, "cmd-" + t.Format("20060102T1504"), 0
		}
		return slot.Success, "cmd-" + t.Format("20060102T1504"), 0
	})
	m.add("ingest-lax", hour, workflow.ServiceCommand)
	fill("ingest-lax", hour, 72, func(i int, t time.Time) (slot.Status, string, int) {
		if i < 6 {
			return "", "", 0 // waiting for data
		}
		return slot.Success, "cmd-" + t.Format("20060102T1504"), 0
	})
	m.paused["ingest-lax"] = true
	m.add("report-hourly", 15*time.Minute, workflow.ServiceOozie)
	fill("report-hourly", 15*time.Minute, 288, func(i int, t time.Time) (slot.Status, string, int) {
		switch {
		case i < 2:
			return "", "", 0
		case i == 2:
			return slot.Running, oozieID(t), 0
		case i == 41:
			return slot.Failure, oozieID(t), 2
		}
		return slot.Success, oozieID(t), 0
	})
	m.add("report-daily", 24*hour, workflow.ServiceOozie)
	fill("report-daily", 24*hour, 7, func(i int, t time.Time) (slot.Status, string, int) {
		return slot.Success, oozieID(t), 0
	})
	m.add("adhoc-export", hour, workflow.ServiceCommand)
	fill("adhoc-export", hour, 72, func(i int, t time.Time) (slot.Status, string, int) {
		if i%24 == 3 {
			return slot.Success, "cmd-" + t.Format("20060102T1504"), 0
		}
		return "", "", 0
	})
	m.loadErrors = []scheduler.LoadError{{File: "/etc/celos/workflows/report-legacy.json", Error: `unsupported format version "celos.dev/workflows/v0" (this celos reads "celos.dev/workflows/v1")`}}
	return m
}
