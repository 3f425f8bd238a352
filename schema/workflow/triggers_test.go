package workflow

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func i64(n int64) *int64 { return &n }

// TestValidateNewTriggers: the dataVolume, failure, sinceLast and event
// triggers, valid and not.
func TestValidateNewTriggers(t *testing.T) {
	dv := func(p string, files, bytes int64) Trigger {
		return Trigger{Type: TriggerDataVolume, Path: p, MinFiles: i64(files), MinBytes: i64(bytes)}
	}
	tests := []struct {
		name string
		tr   Trigger
		want string // "" means valid
	}{
		{"dataVolume", dv("/in/${year}-${month}-${day}/part-*", 1, 1<<30), ""},
		{"dataVolume file", dv("/in/${hour}/data.csv", 0, 0), ""},
		{"dataVolume root", dv("/part-[0-9]?", 2, 0), ""},
		{"dataVolume no path", dv("", 1, 0), "needs a path"},
		{"dataVolume relative", dv("part-*", 1, 0), "must contain a directory"},
		{"dataVolume ends in slash", dv("/in/", 1, 0), "ends with /"},
		{"dataVolume wildcard in directory", dv("/in/*/part-*", 1, 0), "wildcards before its last element"},
		{"dataVolume bad pattern", dv("/in/part-[", 1, 0), "malformed"},
		{"dataVolume negative files", dv("/in/*", -1, 0), "minFiles -1"},
		{"dataVolume negative bytes", dv("/in/*", 1, -5), "minBytes -5"},
		{"dataVolume without sizes", Trigger{Type: TriggerDataVolume, Path: "/in/*"}, "needs minFiles and minBytes"},
		{"dataVolume with child", Trigger{Type: TriggerDataVolume, Path: "/in/*", MinFiles: i64(1), MinBytes: i64(0), Trigger: &Trigger{Type: TriggerAlways}}, "no nested"},
		{"failure", Trigger{Type: TriggerFailure, Workflow: "a"}, ""},
		{"failure bad id", Trigger{Type: TriggerFailure, Workflow: "a b"}, "failure trigger: workflow"},
		{"sinceLast", Trigger{Type: TriggerSinceLast, Workflow: "wf", Seconds: 4 * 3600}, ""},
		{"sinceLast no workflow", Trigger{Type: TriggerSinceLast, Seconds: 60}, "sinceLast trigger: workflow"},
		{"sinceLast zero", Trigger{Type: TriggerSinceLast, Workflow: "wf"}, "seconds 0 must be between 1"},
		{"sinceLast negative", Trigger{Type: TriggerSinceLast, Workflow: "wf", Seconds: -3600}, "seconds -3600"},
		{"sinceLast too long", Trigger{Type: TriggerSinceLast, Workflow: "wf", Seconds: MaxTriggerSeconds + 1}, "100 years"},
		{"event", Trigger{Type: TriggerEvent, Bucket: "ingest", Key: "clicks-${year}${month}${day}T${hour}"}, ""},
		{"event without bucket", Trigger{Type: TriggerEvent, Key: "k"}, "needs a bucket"},
		{"event without key", Trigger{Type: TriggerEvent, Bucket: "b"}, "needs a key"},
		{"event key with dot", Trigger{Type: TriggerEvent, Bucket: "b", Key: "a.b"}, "may not contain"},
		{"event bucket with slash", Trigger{Type: TriggerEvent, Bucket: "../x", Key: "k"}, "may not contain"},
		{"nested in and/not/offset", Trigger{Type: TriggerAnd, Triggers: []Trigger{
			{Type: TriggerNot, Trigger: &Trigger{Type: TriggerFailure, Workflow: "a"}},
			{Type: TriggerOffset, Seconds: -3600, Trigger: &Trigger{Type: TriggerEvent, Bucket: "b", Key: "k"}},
		}}, ""},
		{"nested bad", Trigger{Type: TriggerOr, Triggers: []Trigger{dv("/in/*", 1, 0), {Type: TriggerSinceLast, Workflow: "wf"}}}, "or[1]: sinceLast trigger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := validWorkflow()
			w.Trigger = tt.tr
			err := w.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v, want valid", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate: valid, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Validate: %v, want it to contain %q", err, tt.want)
			case tt.want != "" && !errors.Is(err, ErrInvalid):
				t.Fatalf("Validate: %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestGlobDir(t *testing.T) {
	for _, tt := range []struct{ in, dir, pattern string }{
		{"/in/2024/part-*", "/in/2024", "part-*"},
		{"/part-?", "/", "part-?"},
		{"hdfs://nn:8020/in/x", "hdfs://nn:8020/in", "x"},
	} {
		dir, pattern, err := GlobDir(tt.in)
		if err != nil || dir != tt.dir || pattern != tt.pattern {
			t.Errorf("GlobDir(%q) = %q, %q, %v; want %q, %q", tt.in, dir, pattern, err, tt.dir, tt.pattern)
		}
	}
	if _, _, err := GlobDir("/a/*/b"); !errors.Is(err, ErrBadGlob) {
		t.Errorf("GlobDir(/a/*/b): %v, want ErrBadGlob", err)
	}
}

// TestLoadNewTriggersRoundTrip: the compiled form of the new triggers
// loads and marshals back unchanged; minFiles and minBytes stay explicit
// when they are 0.
func TestLoadNewTriggersRoundTrip(t *testing.T) {
	doc := `{
  "format": "celos.dev/workflows/v1",
  "project": "p",
  "workflows": [
    {
      "id": "wf",
      "schedule": {"type": "cron", "cron": "0 0 * * * ?", "timeZone": "UTC"},
      "trigger": {"type": "or", "triggers": [
        {"type": "dataVolume", "path": "/in/part-*", "minFiles": 0, "minBytes": 0},
        {"type": "sinceLast", "workflow": "wf", "seconds": 14400},
        {"type": "failure", "workflow": "a"},
        {"type": "event", "bucket": "ingest", "key": "k-${hour}"}
      ]},
      "schedulingStrategy": {"type": "serial", "concurrency": 1},
      "externalService": {"type": "command", "command": ["true"]},
      "startTime": "1970-01-01T00:00:00Z",
      "maxRetryCount": 0,
      "waitTimeoutSeconds": 3600
    }
  ]
}`
	p, err := Load(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Trigger{
		{Type: TriggerDataVolume, Path: "/in/part-*", MinFiles: i64(0), MinBytes: i64(0)},
		{Type: TriggerSinceLast, Workflow: "wf", Seconds: 14400},
		{Type: TriggerFailure, Workflow: "a"},
		{Type: TriggerEvent, Bucket: "ingest", Key: "k-${hour}"},
	}
	if d := cmp.Diff(want, p.Workflows[0].Trigger.Triggers); d != "" {
		t.Fatalf("loaded triggers (-want +got):\n%s", d)
	}
	out, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"minFiles": 0,`)) || !bytes.Contains(out, []byte(`"minBytes": 0`)) {
		t.Errorf("minFiles/minBytes 0 not written:\n%s", out)
	}
	bad := strings.Replace(doc, `"minFiles": 0, `, "", 1)
	if _, err := Load(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "needs minFiles and minBytes") {
		t.Errorf("Load without minFiles: %v", err)
	}
}
