package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// errorAnswer is an error answer as a client reads it.
type errorAnswer struct {
	Error      string `json:"error"`
	Code       string `json:"code"`
	ServerTime string `json:"serverTime"`
}

// TestErrorCodes sends, through the real handler on the real engine and
// file state database, one request for each refusal a client acts on and
// checks the status, the machine-readable code and (for not_due) the
// server's time; every answer is validated against openapi.json (strict:
// no undocumented field). The error text stays what it was before codes
// existed (checked word for word for the refusals the CLI used to parse).
func TestErrorCodes(t *testing.T) {
	now := time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC) // the server's clock
	at := func(h, m int) time.Time { return time.Date(2015, 9, 13, h, m, 0, 0, time.UTC) }
	s := newRealServer(t, now,
		slot.State{ID: slot.ID{Workflow: "up", Time: at(12, 0)}, Status: slot.Success, ExternalID: "job-12"},
		slot.State{ID: slot.ID{Workflow: "up", Time: at(13, 0)}, Status: slot.Ready},
		slot.State{ID: slot.ID{Workflow: "run", Time: at(13, 0)}, Status: slot.Running, ExternalID: "job-run"},
	)
	always := workflow.Trigger{Type: workflow.TriggerAlways}
	orphan := newWorkflow("orphan", fixture.HourlyCron, at(12, 0), always, 0)
	orphan.Schedule = workflow.Schedule{Type: workflow.ScheduleDependent, Workflow: "gone"}
	fixture.WriteProject(t, s.wf, "p",
		newWorkflow("up", fixture.HourlyCron, at(12, 0), always, 0),
		newWorkflow("run", fixture.HourlyCron, at(12, 0), always, 0),
		newWorkflow("idle", fixture.HourlyCron, at(12, 0), always, 0),
		newWorkflow("broken", fixture.HourlyCron, at(12, 0), always, 0),
		orphan)
	day := filepath.Join(s.db.Dir(), "state", "broken", "2015-09-13")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(day, "13:00:00.000Z"), []byte(`{"status":`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A register the store cannot read: a directory in its place.
	if err := os.MkdirAll(filepath.Join(s.db.Dir(), "register", "b", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.db.Reload()
	s.do(200, "POST", "/clear-cache", nil) // load the workflows without a step
	s.jobs.killErr = fmt.Errorf("oozie at http://oozie:11000: connection refused: %w", external.ErrUnavailable)

	const token = "0123456789abcdef0123"
	cases := []struct {
		name, method, target string
		body                 string // PUT only; "big" is 1 MiB + 1 byte, else the body
		token                bool   // behind api.RequireToken, sent without the token
		protect              bool   // behind api.Protect (no token, loopback Host only)
		headers              map[string]string
		status               int
		code                 string
		msg                  string // the exact error text, when given
	}{
		{name: "missing parameter", method: "GET", target: "/slot-state?id=up", status: 400, code: "bad_request",
			msg: "time parameter missing."},
		{name: "bad time", method: "GET", target: "/slot-state?id=up&time=yesterday", status: 400, code: "bad_request"},
		{name: "bad register name", method: "GET", target: "/register?bucket=..&key=k", status: 400, code: "bad_request"},
		{name: "rerun not due", method: "POST", target: "/rerun?id=up&time=2015-09-13T14:00Z", status: 400, code: "not_due",
			msg: "rerun refused: up@2015-09-13T14:00:00.000Z is not due yet (the server's time is 2015-09-13T13:40:00.000Z); it runs at its time"},
		{name: "rerun check not due", method: "GET", target: "/rerun?id=up&time=2016-01-01T00:00Z", status: 400, code: "not_due",
			msg: "rerun refused: up@2016-01-01T00:00:00.000Z is not due yet (the server's time is 2015-09-13T13:40:00.000Z); it runs at its time"},
		{name: "rerun before startTime", method: "POST", target: "/rerun?id=up&time=2015-09-13T11:00Z", status: 400, code: "before_start",
			msg: "rerun refused: up@2015-09-13T11:00:00.000Z is before the workflow's startTime 2015-09-13T12:00:00.000Z, where the workflow has no slots"},
		{name: "rerun not final", method: "POST", target: "/rerun?id=up&time=2015-09-13T13:00Z", status: 400, code: "not_final",
			msg: "illegal slot transition: cannot rerun up@2015-09-13T13:00:00.000Z, it is READY"},
		{name: "rerun check in progress", method: "GET", target: "/rerun?id=run&time=2015-09-13T13:00Z", status: 400, code: "not_final"},
		{name: "kill of a final slot", method: "POST", target: "/kill?id=up&time=2015-09-13T12:00Z", status: 400, code: "illegal_transition",
			msg: "illegal slot transition: cannot kill up@2015-09-13T12:00:00.000Z, it is SUCCESS"},
		{name: "unknown workflow", method: "GET", target: "/workflow?id=nope", status: 404, code: "unknown_workflow"},
		{name: "rerun of an unknown workflow", method: "POST", target: "/rerun?id=nope&time=2015-09-13T13:00Z", status: 404, code: "unknown_workflow"},
		{name: "not a slot of the schedule", method: "POST", target: "/rerun?id=up&time=2015-09-13T13:30Z", status: 404, code: "not_in_schedule",
			msg: "time is not a slot of the workflow's schedule: up@2015-09-13T13:30:00.000Z"},
		{name: "slot with no record", method: "GET", target: "/slot-state?id=idle&time=2015-09-13T13:00Z", status: 404, code: "slot_not_found"},
		{name: "no such register", method: "GET", target: "/register?bucket=b&key=none", status: 404, code: "register_not_found"},
		{name: "write to a reserved bucket", method: "PUT", target: "/register?bucket=celos-sla-missed&key=k", body: "{}", status: 403, code: "reserved_bucket"},
		{name: "no such endpoint", method: "GET", target: "/nope", status: 404, code: "unknown_endpoint"},
		{name: "wrong method", method: "DELETE", target: "/rerun?id=up&time=2015-09-13T12:00Z", status: 405, code: "method_not_allowed"},
		{name: "schedule does not resolve", method: "GET", target: "/workflow-slots?id=orphan", status: 409, code: "unschedulable"},
		{name: "corrupt slot record", method: "GET", target: "/slot-state?id=broken&time=2015-09-13T13:00Z", status: 409, code: "slot_unreadable"},
		{name: "body over the limit", method: "PUT", target: "/register?bucket=b&key=k", body: "big", status: 413, code: "too_large"},
		{name: "no token", method: "POST", target: "/pause?id=up&paused=true", token: true, status: 401, code: "unauthorized"},
		{name: "cross-site post", method: "POST", target: "/pause?id=up&paused=true", protect: true,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, status: 403, code: "cross_site",
			msg: "cross-origin request refused: state changes come from celos's own UI, the CLI or non-browser clients"},
		{name: "foreign Host", method: "GET", target: "/workflow-list", protect: true, headers: map[string]string{"Host": "rebind.example"},
			status: 421, code: "misdirected"},
		{name: "store fails", method: "GET", target: "/register?bucket=b&key=dir", status: 500, code: "internal"},
		{name: "no attempt lister", method: "GET", target: "/slot-attempts?id=up&time=2015-09-13T12:00Z", status: 501, code: "not_implemented"},
		{name: "external service down", method: "POST", target: "/kill?id=run&time=2015-09-13T13:00Z", status: 503, code: "unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h http.Handler = s.h
			if c.token {
				h = api.RequireToken(token, s.h, nil)
			}
			if c.protect {
				h = api.Protect(s.h, "", func(host string) bool { return host == "127.0.0.1" }, nil)
			}
			var body *strings.Reader
			switch c.body {
			case "":
				body = strings.NewReader("")
			case "big":
				body = strings.NewReader(`"` + strings.Repeat("x", api.MaxBodyBytes-1) + `"`)
			default:
				body = strings.NewReader(c.body)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(c.method, c.target, body)
			req.Host = "127.0.0.1"
			for k, v := range c.headers {
				if k == "Host" {
					req.Host = v
				}
				req.Header.Set(k, v)
			}
			h.ServeHTTP(rec, req)
			u, _ := url.Parse(c.target)
			api.CheckAnswer(t, c.method, u.Path, rec)
			var got errorAnswer
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("%s %s: %d, body is not JSON: %v: %s", c.method, c.target, rec.Code, err, rec.Body)
			}
			if rec.Code != c.status || got.Code != c.code {
				t.Errorf("%s %s: %d code %q, want %d code %q: %s", c.method, c.target, rec.Code, got.Code, c.status, c.code, rec.Body)
			}
			if c.msg != "" && got.Error != c.msg {
				t.Errorf("%s %s: error text changed:\n got %q\nwant %q", c.method, c.target, got.Error, c.msg)
			}
			// No answer names the state database's files, but for the
			// 409 of a corrupt record, which names it on purpose (an
			// operator repairs or removes it).
			if c.code != "slot_unreadable" && strings.Contains(got.Error, s.db.Dir()) {
				t.Errorf("%s %s: the error names the state database's directory: %s", c.method, c.target, rec.Body)
			}
			wantTime := ""
			if c.code == "not_due" {
				wantTime = "2015-09-13T13:40:00.000Z"
			}
			if got.ServerTime != wantTime {
				t.Errorf("%s %s: serverTime %q, want %q", c.method, c.target, got.ServerTime, wantTime)
			}
		})
	}

	// Nothing refused changed anything: the slots are as stored.
	for _, c := range []struct{ id, at, want string }{
		{"up", "2015-09-13T12:00Z", "SUCCESS/0"}, {"up", "2015-09-13T13:00Z", "READY/0"}, {"run", "2015-09-13T13:00Z", "RUNNING/0"},
	} {
		if got := s.status(c.id, c.at); got != c.want {
			t.Errorf("%s@%s is %s after the refusals, want %s", c.id, c.at, got, c.want)
		}
	}

	// Every code the API answers is one of the cases above, or has its
	// own test.
	tested := map[string]bool{
		"step_stuck":      true, // TestHealthzFailsWhileStepHangs
		"request_timeout": true, // TestBodyTimeout
	}
	for _, c := range cases {
		tested[c.code] = true
	}
	var untested []string
	for _, code := range api.ErrorCodes() {
		if !tested[code] {
			untested = append(untested, code)
		}
	}
	if diff := cmp.Diff([]string(nil), untested); diff != "" {
		t.Errorf("codes without a case here (-want +got):\n%s", diff)
	}
}
