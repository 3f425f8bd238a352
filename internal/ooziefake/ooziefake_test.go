package ooziefake

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// The fake's protocol, request by request, as the Oozie servlets answer.
func TestProtocol(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conf := `<configuration><property><name>user.name</name><value>u</value></property>` +
		`<property><name>oozie.wf.application.path</name><value>hdfs://nn/app</value></property></configuration>`

	do := func(method, path, ct, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := do("POST", "/v1/jobs?action=start", "application/xml;charset=UTF-8", conf)
	if resp.StatusCode != 201 || resp.Header.Get("Content-Type") != `application/json; charset="UTF-8"` {
		t.Fatalf("submit: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var created struct{ ID string }
	if err := json.Unmarshal([]byte(body), &created); err != nil || !strings.HasPrefix(created.ID, "0000000-") || !strings.HasSuffix(created.ID, "-oozie-oozi-W") {
		t.Fatalf("submit body %q", body)
	}
	id := created.ID

	// A submission without action=start stays PREP.
	_, body = do("POST", "/v2/jobs", "application/xml", conf)
	var prep struct{ ID string }
	json.Unmarshal([]byte(body), &prep)

	tests := []struct {
		name, method, path, ct, body string
		status                       int
		code                         string // oozie-error-code
		contains                     string // in the body
	}{
		{"versions", "GET", "/versions", "", "", 200, "", "[0,1,2]"},
		{"admin status", "GET", "/v1/admin/status", "", "", 200, "", `"systemMode":"NORMAL"`},
		{"info", "GET", "/v1/job/" + id + "?show=info", "", "", 200, "", `"status":"RUNNING"`},
		{"info keys", "GET", "/v1/job/" + id, "", "", 200, "", `"appPath":"hdfs://nn/app"`},
		{"prep", "GET", "/v2/job/" + prep.ID + "?show=info", "", "", 200, "", `"status":"PREP"`},
		{"v2 info", "GET", "/v2/job/" + id + "?show=info", "", "", 200, "", `mapreduce.job.user.name`},
		{"v2 show=status", "GET", "/v2/job/" + id + "?show=status", "", "", 200, "", `{"status":"RUNNING"}`},
		{"v1 show=status", "GET", "/v1/job/" + id + "?show=status", "", "", 400, "E0302", ""},
		{"unknown job", "GET", "/v1/job/0000099-x-oozie-oozi-W?show=info", "", "", 400, "E0604", "Job does not exist"},
		{"wrong content type", "POST", "/v1/jobs?action=start", "application/json", "{}", 400, "E0300", ""},
		{"no app path", "POST", "/v1/jobs", "application/xml", "<configuration><property><name>user.name</name><value>u</value></property></configuration>", 400, "E0307", "oozie-fluent-job-api-generated"},
		{"bad action", "PUT", "/v1/job/" + id + "?action=explode", "", "", 400, "E0303", ""},
		{"missing action", "PUT", "/v1/job/" + id, "", "", 400, "E0305", ""},
		{"kill", "PUT", "/v1/job/" + id + "?action=kill", "", "", 200, "", ""},
		{"killed", "GET", "/v1/job/" + id + "?show=info", "", "", 200, "", `"status":"KILLED"`},
		{"kill again is 200", "PUT", "/v1/job/" + id + "?action=kill", "", "", 200, "", ""},
		{"kill unknown", "PUT", "/v1/job/nope?action=kill", "", "", 400, "E0605", "Action does not exist"},
		{"jobs", "GET", "/v1/jobs?jobtype=wf&filter=user%3Du&offset=1&len=10", "", "", 200, "", `"total":2`},
		{"jobs bad filter", "GET", "/v1/jobs?filter=colour%3Dred", "", "", 400, "E0420", ""},
		{"wrong method", "DELETE", "/v1/job/" + id, "", "", 405, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(tc.method, tc.path, tc.ct, tc.body)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d (%s)", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("oozie-error-code"); got != tc.code {
				t.Errorf("oozie-error-code %q, want %q", got, tc.code)
			}
			if tc.code != "" {
				if resp.Header.Get("oozie-error-message") == "" {
					t.Error("no oozie-error-message")
				}
				if json.Valid([]byte(body)) {
					t.Errorf("error body is JSON: %s", body)
				}
			}
			if !strings.Contains(body, tc.contains) {
				t.Errorf("body %q does not contain %q", body, tc.contains)
			}
		})
	}
	if j, _ := s.Job(id); j.KillRequests != 2 || !j.Killed {
		t.Errorf("kill bookkeeping: %+v", j)
	}
}

func TestPlanAndModes(t *testing.T) {
	s, err := Start(RequireUser())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetPlan(func(map[string]string) []string { return []string{Prep, Running, Failed} })
	post := func() *http.Response {
		resp, err := http.Post(s.URL+"/v1/jobs?action=start&user.name=x", "application/xml",
			strings.NewReader(`<configuration><property><name>oozie.wf.application.path</name><value>/a</value></property></configuration>`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if post().StatusCode != 201 {
		t.Fatal("submit failed")
	}
	id := s.Jobs()[0].ID
	var seen []string
	for i := 0; i < 4; i++ {
		resp, err := http.Get(s.URL + "/v2/job/" + id + "?show=status&user.name=x")
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		seen = append(seen, st.Status)
	}
	if strings.Join(seen, ",") != "PREP,RUNNING,FAILED,FAILED" {
		t.Errorf("plan walked %v", seen)
	}
	if s.Jobs()[0].User != "x" || s.Jobs()[0].Conf["user.name"] != "x" {
		t.Errorf("user: %+v", s.Jobs()[0])
	}

	// Without user.name: 401.
	resp, err := http.Get(s.URL + "/v1/job/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("anonymous request: %d", resp.StatusCode)
	}

	s.SetMode(SafeMode)
	if r := post(); r.StatusCode != 503 || r.Header.Get("oozie-error-code") != "E0002" {
		t.Errorf("safe mode submit: %d %s", r.StatusCode, r.Header.Get("oozie-error-code"))
	}
	s.SetMode(Normal)

	s.Down()
	if _, err := http.Get(s.URL + "/versions"); err == nil {
		t.Error("a downed server answered")
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if r := post(); r.StatusCode != 201 || len(s.Jobs()) != 2 {
		t.Errorf("after Up: %d, %d jobs", r.StatusCode, len(s.Jobs()))
	}
}

// The fake is a test double: the celos binary must not contain it.
func TestNotInTheBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/celos-go/celos/cmd/celos").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/celos-go/celos/internal/ooziefake" {
			t.Fatal("cmd/celos imports internal/ooziefake")
		}
	}
}
