package testcase

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/schema/workflow"
)

func TestCheckPath(t *testing.T) {
	for p, want := range map[string]string{
		"/in":               "",
		"/in/${year}/x":     "",
		"/a..b/c":           "",
		"":                  "is empty",
		"in":                `"in" is not absolute`,
		"/":                 `"/" is the whole sandbox`,
		"/a/../../etc":      `"/a/../../etc" leaves the test's prefix (a .. element)`,
		"/a/./b":            `"/a/./b" is not clean (write "/a/b")`,
		"/a//b":             `"/a//b" is not clean (write "/a/b")`,
		"/a/":               `"/a/" is not clean (write "/a")`,
		"hdfs://nn:8020/in": `"hdfs://nn:8020/in" is a URI`,
		"hdfs:/in":          `"hdfs:/in" is a URI`,
		"file:///in":        `"file:///in" is a URI`,
	} {
		err := CheckPath(p)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckPath(%q) = %v, want %q", p, err, want)
		}
	}
	for name, ok := range map[string]bool{"a": true, "a/b": true, "_READY": true, "": false, "/a": false, "../a": false, "a/../../b": false, "a/": false, ".": false} {
		if err := CheckFileName(name); (err == nil) != ok {
			t.Errorf("CheckFileName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestValidate(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	p := &workflow.Project{Workflows: []workflow.Workflow{{ID: "a"}}}
	good := Case{Name: "c", Start: start, End: start.Add(time.Hour), Timeout: time.Minute,
		Inputs:  []Input{{Path: "/in", Files: map[string]string{"x": ""}}, {Path: "/in/more", Fixture: "/abs/dir"}},
		Outputs: []Output{{Path: "/out", Files: map[string]string{}, Comparer: Comparer{Type: ComparePlain}}}}
	if err := (&Suite{Cases: []Case{good}}).Validate(p); err != nil {
		t.Fatalf("a good case: %v", err)
	}
	bad := good
	bad.Name = "C" // the same as "c", ignoring case
	bad.Workflows = []string{"a", "b"}
	bad.Inputs = []Input{{Path: "/in", Fixture: "/x", Files: map[string]string{"y": ""}}}
	bad.Outputs = []Output{
		{Path: "/in/out", Files: map[string]string{"../x": ""}, Comparer: Comparer{Type: ComparePlain}},
		{Path: "/o", Comparer: Comparer{Type: "xml"}},
	}
	bad.Timeout = 0
	err := (&Suite{Cases: []Case{good, bad}}).Validate(p)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v", err)
	}
	want := []string{
		`invalid test case "C": another case has the same name (names are compared ignoring case: they name sandbox directories)`,
		`invalid test case "C": timeout must be positive`,
		`invalid test case "C": workflows: "b" is not a workflow of the project`,
		`invalid test case "C": inputs[0]: give either fixture (a directory or file) or files (inline)`,
		`invalid test case "C": outputs[0].files: file name "../x" must be a clean relative path inside the directory`,
		`invalid test case "C": outputs[1]: give either expected (a directory) or files (inline)`,
		`invalid test case "C": outputs[1].comparer: unknown type "xml" (plain, ndjson or tsv)`,
		`invalid test case "C": inputs[0] (/in) and outputs[0] (/in/out) overlap: one is inside the other`,
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestValidateSlotLimit: a case whose range gives one of its workflows
// more than MaxCaseSlots slot times is refused, naming the workflow and
// the count: before, a minutely workflow over 2000..2099 (52 million
// slots) was accepted, and celos test grew past 12 GB before its time
// limit. A dependent workflow counts as its upstream; workflows the case
// does not run are not counted.
func TestValidateSlotLimit(t *testing.T) {
	cronW := func(id, expr string) workflow.Workflow {
		return workflow.Workflow{ID: id, Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: expr, TimeZone: "UTC"}}
	}
	p := &workflow.Project{Workflows: []workflow.Workflow{
		cronW("minutely", "0 * * * * ?"),
		cronW("hourly", "0 0 * * * ?"),
		{ID: "after", Schedule: workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: "minutely"}},
	}}
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(end time.Time, ids ...string) Case {
		return Case{Name: "c", Start: start, End: end, Timeout: time.Minute, Workflows: ids,
			Outputs: []Output{{Path: "/out", Files: map[string]string{}, Comparer: Comparer{Type: ComparePlain}}}}
	}
	for _, tc := range []struct {
		name string
		c    Case
		want string
	}{
		{"a century minutely", mk(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), "minutely"),
			`invalid test case "c": workflow minutely has more than 10000 slots from sampleTimeStart to sampleTimeEnd; a case covers at most 10000 per workflow (a shorter range)`},
		{"dependent", mk(start.AddDate(0, 1, 0), "after"),
			`invalid test case "c": workflow after has more than 10000 slots from sampleTimeStart to sampleTimeEnd; a case covers at most 10000 per workflow (a shorter range)`},
		{"every workflow", mk(start.AddDate(0, 1, 0)),
			`invalid test case "c": workflow after has more than 10000 slots from sampleTimeStart to sampleTimeEnd; a case covers at most 10000 per workflow (a shorter range)` + "\n" +
				`invalid test case "c": workflow minutely has more than 10000 slots from sampleTimeStart to sampleTimeEnd; a case covers at most 10000 per workflow (a shorter range)`},
		{"a year hourly", mk(start.AddDate(1, 0, 0), "hourly"), ""},
		{"exactly the limit", mk(start.Add((MaxCaseSlots-1)*time.Minute), "minutely"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Suite{Cases: []Case{tc.c}}).Validate(p)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
