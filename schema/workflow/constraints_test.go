package workflow

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestRunFieldsValidate(t *testing.T) {
	okConstraints := func() *Constraints {
		return &Constraints{TimeWindow: &TimeWindow{From: "22:00", To: "06:00", TimeZone: "Europe/Berlin"},
			MinIntervalSeconds: 3600, MaxRuns: &MaxRuns{Count: 1, PeriodSeconds: 86400},
			TimeoutSeconds: NeverTimeout, OnTimeout: OnTimeoutGiveUp}
	}
	hook := func() Notification {
		return Notification{Type: NotifyWebhook, URL: "https://hooks.example/celos", SecretFile: "/etc/celos/hook.secret", Events: Events}
	}
	tests := []struct {
		name   string
		change func(w *Workflow)
		want   string
	}{
		{"all valid", func(w *Workflow) {
			w.Constraints = okConstraints()
			w.Pool, w.Priority = "etl", 10
			w.SLA = &SLA{SuccessWithinSeconds: 3 * 3600}
			w.Notify = []Notification{hook()}
		}, ""},
		{"window 25:00", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.TimeWindow.From = "25:00" }, `"25:00" is not a time of day`},
		{"window 9:00", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.TimeWindow.To = "9:00" }, `"9:00" is not a time of day`},
		{"window empty", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.TimeWindow.To = "22:00" }, "would be empty"},
		{"window zone", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.TimeWindow.TimeZone = "Mars/Olympus" }, "time zone"},
		{"negative interval", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.MinIntervalSeconds = -1 }, "minIntervalSeconds -1"},
		{"maxRuns 0", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.MaxRuns.Count = 0 }, "count 0"},
		{"maxRuns no period", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.MaxRuns.PeriodSeconds = 0 }, "periodSeconds 0"},
		{"negative timeout", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.TimeoutSeconds = -5 }, "timeoutSeconds -5"},
		{"onTimeout", func(w *Workflow) { w.Constraints = okConstraints(); w.Constraints.OnTimeout = "skip" }, `onTimeout "skip"`},
		{"pool name", func(w *Workflow) { w.Pool = "a/b" }, `pool "a/b"`},
		{"priority", func(w *Workflow) { w.Priority = MaxPriority + 1 }, "priority"},
		{"sla 0", func(w *Workflow) { w.SLA = &SLA{} }, "successWithinSeconds 0"},
		{"hook type", func(w *Workflow) { h := hook(); h.Type = "email"; w.Notify = []Notification{h} }, `notify[0]: unknown type "email"`},
		{"hook url", func(w *Workflow) { h := hook(); h.URL = "ftp://x/"; w.Notify = []Notification{h} }, "http or https"},
		{"hook secret relative", func(w *Workflow) { h := hook(); h.SecretFile = "secret"; w.Notify = []Notification{h} }, "clean absolute path"},
		{"hook no events", func(w *Workflow) { h := hook(); h.Events = nil; w.Notify = []Notification{h} }, "at least one"},
		{"hook bad event", func(w *Workflow) { h := hook(); h.Events = []string{"sometimes"}; w.Notify = []Notification{h} }, `unknown event "sometimes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := validWorkflow()
			tt.change(&w)
			err := w.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestTimeWindowContains(t *testing.T) {
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	night := &TimeWindow{From: "22:00", To: "06:00", TimeZone: "UTC"}
	day := &TimeWindow{From: "09:00", To: "17:30", TimeZone: "UTC"}
	// Europe/Berlin: 2026-03-29 02:00 CET → 03:00 CEST; 2026-10-25 03:00 CEST → 02:00 CET.
	berlin := &TimeWindow{From: "02:00", To: "03:00", TimeZone: "Europe/Berlin"}
	berlinNight := &TimeWindow{From: "22:00", To: "06:00", TimeZone: "Europe/Berlin"}
	ny := &TimeWindow{From: "01:30", To: "02:30", TimeZone: "America/New_York"}
	tests := []struct {
		name string
		tw   *TimeWindow
		at   string
		want bool
	}{
		{"night: at from", night, "2026-01-10T22:00:00Z", true},
		{"night: just before from", night, "2026-01-10T21:59:59Z", false},
		{"night: after midnight", night, "2026-01-11T03:00:00Z", true},
		{"night: at to (exclusive)", night, "2026-01-11T06:00:00Z", false},
		{"night: noon", night, "2026-01-11T12:00:00Z", false},
		{"day: inside", day, "2026-01-11T17:29:59Z", true},
		{"day: at to", day, "2026-01-11T17:30:00Z", false},
		{"day: before", day, "2026-01-11T08:59:00Z", false},
		// DST rows.
		{"berlin spring forward: 01:59 CET is before the window", berlin, "2026-03-29T00:59:00Z", false},
		{"berlin spring forward: the next minute is 03:00 CEST, the window never existed", berlin, "2026-03-29T01:00:00Z", false},
		{"berlin the day after: 02:30 CEST is inside", berlin, "2026-03-30T00:30:00Z", true},
		{"berlin fall back: first 02:30 (CEST) inside", berlin, "2026-10-25T00:30:00Z", true},
		{"berlin fall back: second 02:30 (CET) inside too", berlin, "2026-10-25T01:30:00Z", true},
		{"berlin fall back: 03:00 CET is outside", berlin, "2026-10-25T02:00:00Z", false},
		{"berlin night in summer: 23:00 CEST = 21:00Z inside", berlinNight, "2026-07-01T21:00:00Z", true},
		{"berlin night in winter: 21:00Z = 22:00 CET inside", berlinNight, "2026-01-01T21:00:00Z", true},
		{"berlin night in summer: 20:30Z = 22:30 CEST inside", berlinNight, "2026-07-01T20:30:00Z", true},
		{"berlin night in winter: 20:30Z = 21:30 CET outside", berlinNight, "2026-01-01T20:30:00Z", false},
		{"berlin night: 04:30Z in summer is 06:30 CEST, outside", berlinNight, "2026-07-02T04:30:00Z", false},
		{"berlin night: 04:30Z in winter is 05:30 CET, inside", berlinNight, "2026-01-02T04:30:00Z", true},
		{"new york fall back: 01:45 EDT inside", ny, "2026-11-01T05:45:00Z", true},
		{"new york fall back: 01:45 EST inside", ny, "2026-11-01T06:45:00Z", true},
		{"new york spring forward: 03:00 EDT outside", ny, "2026-03-08T07:00:00Z", false},
		{"new york spring forward: 01:45 EST inside", ny, "2026-03-08T06:45:00Z", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.tw.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tt.tw.Contains(utc(tt.at)); got != tt.want {
				t.Errorf("%+v.Contains(%s) = %v, want %v", *tt.tw, tt.at, got, tt.want)
			}
		})
	}
}

// Every minute of a year in Berlin: a window and its complement (to–from)
// cover each instant exactly once.
func TestTimeWindowComplementCoversEveryMinute(t *testing.T) {
	w := &TimeWindow{From: "22:00", To: "06:00", TimeZone: "Europe/Berlin"}
	c := &TimeWindow{From: "06:00", To: "22:00", TimeZone: "Europe/Berlin"}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for m := 0; m < 366*24*60; m += 7 {
		at := start.Add(time.Duration(m) * time.Minute)
		if w.Contains(at) == c.Contains(at) {
			t.Fatalf("at %s window %v complement %v", at, w.Contains(at), c.Contains(at))
		}
	}
}

func TestRunLookBack(t *testing.T) {
	day := int64(86400)
	for _, tc := range []struct {
		name string
		c    *Constraints
		want time.Duration
	}{
		{"none", nil, 0},
		{"time window only", &Constraints{TimeWindow: &TimeWindow{From: "01:00", To: "02:00"}}, 0},
		{"minInterval", &Constraints{MinIntervalSeconds: 4 * 3600}, 4 * time.Hour},
		{"maxRuns longer", &Constraints{MinIntervalSeconds: 3600, MaxRuns: &MaxRuns{Count: 2, PeriodSeconds: 30 * day}}, 30 * 24 * time.Hour},
		{"minInterval longer", &Constraints{MinIntervalSeconds: 40 * day, MaxRuns: &MaxRuns{Count: 2, PeriodSeconds: day}}, 40 * 24 * time.Hour},
		{"saturates", &Constraints{MinIntervalSeconds: math.MaxInt64}, math.MaxInt64},
	} {
		if got := tc.c.RunLookBack(); got != tc.want {
			t.Errorf("%s: RunLookBack = %v, want %v", tc.name, got, tc.want)
		}
	}
}
