package workflow

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func validWorkflow() Workflow {
	return Workflow{
		ID:                 "wf",
		Schedule:           Schedule{Type: ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger:            Trigger{Type: TriggerAlways},
		SchedulingStrategy: Strategy{Type: StrategySerial, Concurrency: 1},
		ExternalService:    ExternalService{Type: ServiceCommand, Command: []string{"true"}},
		StartTime:          DefaultStartTime,
		WaitTimeoutSeconds: NeverTimeout,
	}
}

func TestWorkflowValidate(t *testing.T) {
	nest := func(depth int) Trigger {
		tr := Trigger{Type: TriggerAlways}
		for i := 1; i < depth; i++ {
			child := tr
			tr = Trigger{Type: TriggerNot, Trigger: &child}
		}
		return tr
	}
	tests := []struct {
		name   string
		change func(w *Workflow)
		want   string // "" means valid
	}{
		{"valid", func(w *Workflow) {}, ""},
		{"id with slash", func(w *Workflow) { w.ID = "a/b" }, "id must match"},
		{"id dot dot", func(w *Workflow) { w.ID = ".." }, "id must match"},
		{"id too long", func(w *Workflow) { w.ID = strings.Repeat("a", 256) }, "at most 255 bytes"},
		{"bad cron", func(w *Workflow) { w.Schedule.Cron = "0 0 25 * * ?" }, "hours"},
		{"bad zone", func(w *Workflow) { w.Schedule.TimeZone = "Mars/Olympus" }, "time zone"},
		{"machine zone", func(w *Workflow) { w.Schedule.TimeZone = "Local" }, "the zone of the machine"},
		{"dependent without workflow", func(w *Workflow) { w.Schedule = Schedule{Type: ScheduleDependent} }, "dependent schedule"},
		{"concurrency 0", func(w *Workflow) { w.SchedulingStrategy.Concurrency = 0 }, "concurrency 0 must be at least 1"},
		{"unknown trigger", func(w *Workflow) { w.Trigger = Trigger{Type: "sometimes"} }, "unknown trigger type"},
		{"not without child", func(w *Workflow) { w.Trigger = Trigger{Type: TriggerNot} }, "exactly one nested"},
		{"max depth ok", func(w *Workflow) { w.Trigger = nest(MaxTriggerDepth) }, ""},
		{"too deep", func(w *Workflow) { w.Trigger = nest(MaxTriggerDepth + 1) }, "deeper than 16 levels"},
		{"negative delay", func(w *Workflow) { w.Trigger = Trigger{Type: TriggerDelay, Seconds: -1} }, "delay trigger"},
		{"huge delay overflows durations", func(w *Workflow) { w.Trigger = Trigger{Type: TriggerDelay, Seconds: 1e10} }, "100 years"},
		{"huge negative offset", func(w *Workflow) {
			w.Trigger = Trigger{Type: TriggerOffset, Seconds: -1e10, Trigger: &Trigger{Type: TriggerAlways}}
		}, "offset trigger"},
		{"negative offset ok", func(w *Workflow) {
			w.Trigger = Trigger{Type: TriggerOffset, Seconds: -3600, Trigger: &Trigger{Type: TriggerAlways}}
		}, ""},
		{"wait timeout beyond never", func(w *Workflow) { w.WaitTimeoutSeconds = NeverTimeout + 1 }, "waitTimeoutSeconds"},
		{"negative retries", func(w *Workflow) { w.MaxRetryCount = -1 }, "maxRetryCount"},
		{"start not UTC", func(w *Workflow) { w.StartTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)) }, "must be in UTC"},
		{"empty command", func(w *Workflow) { w.ExternalService.Command = nil }, "non-empty command"},
		{"command timeout overflows durations", func(w *Workflow) { w.ExternalService.TimeoutSeconds = NeverTimeout + 1 }, "timeoutSeconds 2147483648 must be between 0 and 2147483647"},
		{"command timeout at the bound", func(w *Workflow) { w.ExternalService.TimeoutSeconds = NeverTimeout }, ""},
		{"oozie with command", func(w *Workflow) { w.ExternalService.Type = ServiceOozie }, "only properties and url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := validWorkflow()
			tt.change(&w)
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

func TestLoadRejects(t *testing.T) {
	twice, err := (&Project{Format: FormatVersion, Project: "p", Workflows: []Workflow{validWorkflow(), validWorkflow()}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		want      error
		msg       string // the message says this
	}{
		{"not json", `{`, ErrFormat, "not a celos compiled workflows document"},
		{"no format", `{"project":"p","workflows":[]}`, ErrFormat, ""},
		{"other version", `{"format":"celos.dev/workflows/v0","project":"p","workflows":[]}`, ErrVersion, `unsupported format version "celos.dev/workflows/v0" (this celos reads "celos.dev/workflows/v1")`},
		{"unknown field", `{"format":"` + FormatVersion + `","project":"p","workflows":[],"extra":1}`, ErrFormat, `unknown field "extra"`},
		{"unknown workflow field", `{"format":"` + FormatVersion + `","project":"p","workflows":[{"id":"a","retries":1}]}`, ErrFormat, `unknown field "retries"`},
		{"trailing data", `{"format":"` + FormatVersion + `","project":"p","workflows":[]} {}`, ErrFormat, ""},
		{"bad project name", `{"format":"` + FormatVersion + `","project":"../x","workflows":[]}`, ErrInvalid, ""},
		{"duplicate id", string(twice), ErrInvalid, `workflow "wf": duplicate id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tt.doc))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Load: %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Load: %q does not say %q", err, tt.msg)
			}
		})
	}
}

func TestLoadRoundTrip(t *testing.T) {
	p := &Project{Format: FormatVersion, Project: "p", Workflows: []Workflow{validWorkflow()}}
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(strings.NewReader(string(data)))
	if err != nil {
		t.Fatalf("Load(Marshal(p)): %v", err)
	}
	again, _ := back.Marshal()
	if string(again) != string(data) {
		t.Fatalf("round trip changed the document:\n%s\n---\n%s", data, again)
	}
}

func TestLoadNamesWhatItGot(t *testing.T) {
	_, err := Load(strings.NewReader(`[1, 2]`))
	if err == nil || !strings.Contains(err.Error(), "must be a JSON object (it is an array)") || strings.Contains(err.Error(), "Go value") {
		t.Fatalf("Load(array) = %v, want a message naming the array and no Go type", err)
	}
}

// TestLoadErrorsQuoteNoContent: whatever a file holds, Load's error names
// the problem and never repeats the file's bytes (a workflows-directory
// symlink to /etc/shadow must not show on /workflow-list). Only a document
// that declares the celos format may be quoted, and then only its ids and
// field names, never a value encoding/json would echo.
func TestLoadErrorsQuoteNoContent(t *testing.T) {
	const secret = "s3cr3tXq"
	wf := func(field, value string) string {
		return `{"format":"` + FormatVersion + `","project":"p","workflows":[{"id":"a","` + field + `":` + value + `}]}`
	}
	tests := []struct {
		name, doc string
		want      error
		msg       string // the message still says what is wrong
	}{
		{"shadow file", "root:" + secret + ":19000:0:99999:7:::\n", ErrFormat, "must be a JSON object"},
		{"number", "31415926" + secret, ErrFormat, "must be a JSON object"},
		{"format value", `{"format":"` + secret + `"}`, ErrVersion, FormatVersion},
		{"long format value", `{"format":"` + strings.Repeat(secret, 1000) + `"}`, ErrVersion, FormatVersion},
		{"format number", `{"format":31415926}`, ErrFormat, "format"},
		{"format object", `{"format":{"` + secret + `":1}}`, ErrFormat, "format"},
		{"bad syntax in a string", `{"format":"` + secret + `\x"}`, ErrFormat, "line 1, column"},
		{"bad syntax after a key", `{"format":"celos.dev/workflows/v1","` + secret + `" 1}`, ErrFormat, "line 1, column"},
		{"syntax error later", `{"a":"` + secret + `",` + "\n" + `"b":` + secret + `}`, ErrFormat, "line 2, column"},
		{"time", wf("startTime", `"`+secret+`"`), ErrFormat, "startTime"},
		{"time number", wf("startTime", `31415926`), ErrFormat, "startTime"},
		{"number for a string", wf("url", `31415926`), ErrFormat, "url"},
		{"fraction for an integer", wf("maxRetryCount", `31415926.5`), ErrFormat, "maxRetryCount"},
		{"string for an integer", wf("maxRetryCount", `"`+secret+`"`), ErrFormat, "maxRetryCount"},
		{"huge number", wf("maxRetryCount", `31415926`+strings.Repeat("0", 40)), ErrFormat, "maxRetryCount"},
		{"object for an array", wf("contacts", `{"`+secret+`":1}`), ErrFormat, "contacts"},
		{"unknown field", `{"format":"` + FormatVersion + `","project":"p","workflows":[],"` + secret + `\u0000":1}`, ErrFormat, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tt.doc))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Load: %v, want %v", err, tt.want)
			}
			for _, leak := range []string{secret, "31415926", "root:", "Go struct", "Go value"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("Load: %q repeats %q", err, leak)
				}
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Load: %q does not say %q", err, tt.msg)
			}
		})
	}
}

// TestValidationErrorsAreShort: a huge value in any quoted field of a
// celos document gives a short error (load errors are served on
// /workflow-list and logged), still naming the problem.
func TestValidationErrorsAreShort(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name   string
		change func(p *Project)
		want   string
	}{
		{"project", func(p *Project) { p.Project = huge + "/" }, "project name"},
		{"id", func(p *Project) { p.Workflows[0].ID = huge + "/" }, "id must match"},
		{"strategy", func(p *Project) { p.Workflows[0].SchedulingStrategy.Type = huge }, "schedulingStrategy: unknown type"},
		{"schedule type", func(p *Project) { p.Workflows[0].Schedule.Type = huge }, "schedule: unknown type"},
		{"cron", func(p *Project) { p.Workflows[0].Schedule.Cron = huge }, "longer than 1024 bytes"},
		{"time zone", func(p *Project) { p.Workflows[0].Schedule.TimeZone = huge }, "longer than 64 bytes"},
		{"dependent", func(p *Project) { p.Workflows[0].Schedule = Schedule{Type: ScheduleDependent, Workflow: huge + "/"} }, "not a valid id"},
		{"trigger type", func(p *Project) { p.Workflows[0].Trigger.Type = huge }, "unknown trigger type"},
		{"success trigger", func(p *Project) { p.Workflows[0].Trigger = Trigger{Type: TriggerSuccess, Workflow: huge + "/"} }, "not a valid id"},
		{"service type", func(p *Project) { p.Workflows[0].ExternalService.Type = huge }, "externalService: unknown type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Project{Format: FormatVersion, Project: "p", Workflows: []Workflow{validWorkflow()}}
			tt.change(p)
			data, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			_, err = Load(strings.NewReader(string(data)))
			if err == nil || !strings.Contains(err.Error(), tt.want) || len(err.Error()) > 1024 {
				t.Fatalf("Load: %d-byte error %.300q, want a short one saying %q", len(fmt.Sprint(err)), fmt.Sprint(err), tt.want)
			}
		})
	}
}

// JSONKind names what a file holds; text that is not JSON at all (a pools
// file written in CUE, a YAML file) is not "a number" or "null".
func TestJSONKind(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"  \n", "empty"},
		{`{"a": 1}`, "an object"},
		{` [1, 2]`, "an array"},
		{`"x"`, "a string"},
		{"true", "true or false"},
		{"false", "true or false"},
		{"null", "null"},
		{"-12.5e3", "a number"},
		{"7", "a number"},
		{`pools: [{name: "a"}]`, "not JSON"},
		{"garbage{{", "not JSON"},
		{"nope", "not JSON"},
		{"truest", "not JSON"},
		{"{\"a\": 1", "not JSON"},
		{"- a\n- b\n", "not JSON"},
	} {
		if got := JSONKind([]byte(tc.in)); got != tc.want {
			t.Errorf("JSONKind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
