package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/schema/workflow"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestCronTimes(t *testing.T) {
	s, err := NewCron("0 0 * * * ?", "")
	if err != nil {
		t.Fatal(err)
	}
	got := s.Times(ts("2024-01-01T00:00:00Z"), ts("2024-01-01T03:00:00Z"))
	if len(got) != 3 || !got[0].Equal(ts("2024-01-01T00:00:00Z")) || !got[2].Equal(ts("2024-01-01T02:00:00Z")) {
		t.Fatalf("start inclusive, end exclusive: %v", got)
	}
	// A start inside the first second of a slot does not create a slot at
	// a fractional time (Celos's Quartz quirk).
	got = s.Times(ts("2024-01-01T00:00:00.250Z"), ts("2024-01-01T02:00:00Z"))
	if len(got) != 1 || !got[0].Equal(ts("2024-01-01T01:00:00Z")) {
		t.Fatalf("fractional start: %v", got)
	}
	if got := s.Times(ts("2024-01-01T03:00:00Z"), ts("2024-01-01T03:00:00Z")); len(got) != 0 {
		t.Fatalf("empty window: %v", got)
	}
	for _, tc := range []struct {
		t    string
		want bool
	}{{"2024-01-01T05:00:00Z", true}, {"2024-01-01T05:00:00.001Z", false}, {"2024-01-01T05:00:01Z", false}, {"2024-01-01T05:30:00Z", false}} {
		if got := s.InSchedule(ts(tc.t)); got != tc.want {
			t.Errorf("InSchedule(%s) = %v", tc.t, got)
		}
	}
	for _, tm := range s.Times(ts("2024-01-01T00:00:00Z"), ts("2024-01-02T00:00:00Z")) {
		if tm.Location() != time.UTC {
			t.Fatalf("%v not UTC", tm)
		}
	}
}

func TestCronTimeZone(t *testing.T) {
	s, err := NewCron("0 0 2 * * ?", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	got := s.Times(ts("2024-01-01T00:00:00Z"), ts("2024-01-03T00:00:00Z"))
	if len(got) != 2 || !got[0].Equal(ts("2024-01-01T07:00:00Z")) {
		t.Fatalf("%v", got)
	}
	if _, err := NewCron("0 0 2 * * ?", "Mars/Base"); err == nil {
		t.Fatal("bad zone accepted")
	}
	if _, err := NewCron("nonsense", ""); err == nil {
		t.Fatal("bad cron accepted")
	}
}

func wf(id string, s workflow.Schedule) *workflow.Workflow {
	return &workflow.Workflow{ID: id, Schedule: s}
}

func TestResolve(t *testing.T) {
	hourly := workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"}
	dep := func(on string) workflow.Schedule {
		return workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: on}
	}
	ws := map[string]*workflow.Workflow{
		"base":  wf("base", hourly),
		"d1":    wf("d1", dep("base")),
		"d2":    wf("d2", dep("d1")),
		"lost":  wf("lost", dep("missing")),
		"c1":    wf("c1", dep("c2")),
		"c2":    wf("c2", dep("c1")),
		"self":  wf("self", dep("self")),
		"intoc": wf("intoc", dep("c1")),
	}
	scheds, errs := Resolve(ws)
	for _, id := range []string{"base", "d1", "d2"} {
		if scheds[id] == nil || scheds[id].Key() != scheds["base"].Key() {
			t.Errorf("%s not resolved to base's schedule", id)
		}
	}
	for id, want := range map[string]string{"lost": `"missing" not found`, "c1": "cycle", "c2": "cycle", "self": "cycle", "intoc": "cycle"} {
		if errs[id] == nil || !strings.Contains(errs[id].Error(), want) || scheds[id] != nil {
			t.Errorf("%s: %v, want %q", id, errs[id], want)
		}
	}
	if len(errs) != 5 {
		t.Errorf("errors %v", errs)
	}
}
