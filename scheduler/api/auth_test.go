package api

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testToken = "0123456789abcdef0123456789abcdef"

// authTester is a tester whose handler requires testToken, logging to log;
// reached counts the requests that got past the token check.
func authTester(t *testing.T, f *fakeService) (ts *tester, h http.Handler, log *bytes.Buffer, reached *int) {
	t.Helper()
	ts = newTester(t, f)
	log = new(bytes.Buffer)
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts.h.log = logger
	reached = new(int)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*reached++
		ts.h.ServeHTTP(w, r)
	})
	return ts, RequireToken(testToken, inner, logger), log, reached
}

// send sends one request through h with the given Authorization headers
// and checks the answer against openapi.json.
func send(t *testing.T, ts *tester, h http.Handler, method, target, body string, auth ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	u, _ := url.Parse(target)
	checkResponse(t, ts.doc, method, u.Path, rec)
	return rec
}

func TestRequireTokenGuardsEveryChange(t *testing.T) {
	f := newFake("a")
	ts, h, log, reached := authTester(t, f)
	changes := []struct{ method, target, body string }{
		{"POST", "/scheduler?time=2015-09-13T13:40Z", ""},
		{"POST", "/rerun?id=a&time=2015-09-13T13:00Z", ""},
		{"POST", "/kill?id=a&time=2015-09-13T13:00Z", ""},
		{"POST", "/pause?id=a&paused=true", ""},
		{"PUT", "/register?bucket=b&key=k", `{"v":1}`},
		{"DELETE", "/register?bucket=b&key=k", ""},
		{"POST", "/clear-cache", ""},
	}
	bad := map[string][]string{
		"no header":    nil,
		"wrong token":  {"Bearer " + strings.Repeat("x", len(testToken))},
		"prefix":       {"Bearer " + testToken[:len(testToken)-1]},
		"longer":       {"Bearer " + testToken + "0"},
		"basic scheme": {"Basic " + testToken},
		"no scheme":    {testToken},
		"empty bearer": {"Bearer "},
		"two headers":  {"Bearer " + testToken, "Bearer " + testToken},
	}
	for _, c := range changes {
		for name, auth := range bad {
			rec := send(t, ts, h, c.method, c.target, c.body, auth...)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("%s %s, %s: status %d, want 401", c.method, c.target, name, rec.Code)
			}
			ch := rec.Header().Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, `Bearer realm="celos"`) {
				t.Errorf("%s: WWW-Authenticate %q", name, ch)
			}
			if wrong := len(auth) == 1 && strings.HasPrefix(auth[0], "Bearer ") && auth[0] != "Bearer "; wrong != strings.Contains(ch, `error="invalid_token"`) {
				t.Errorf("%s: WWW-Authenticate %q", name, ch)
			}
			if msg := errMsg(t, rec); !strings.Contains(msg, "token") {
				t.Errorf("%s: error %q", name, msg)
			}
		}
	}
	// Nothing reached the service.
	if *reached != 0 || f.paused["a"] || len(f.steps) != 0 || len(f.registers) != 0 {
		t.Fatalf("%d refused requests reached the API", *reached)
	}
	// With the token (any case of the scheme) every change goes through.
	for i, c := range changes {
		scheme := []string{"Bearer", "bearer", "BEARER"}[i%3]
		rec := send(t, ts, h, c.method, c.target, c.body, scheme+" "+testToken)
		if rec.Code == http.StatusUnauthorized {
			t.Errorf("%s %s with the token: 401 %s", c.method, c.target, rec.Body)
		}
	}
	if !f.paused["a"] || len(f.steps) != 1 {
		t.Errorf("authorized requests did not reach the service: paused %v steps %v", f.paused, f.steps)
	}
	// The token never appears in the log; refusals do.
	if strings.Contains(log.String(), testToken[:8]) || strings.Contains(log.String(), "xxxxxxxx") {
		t.Errorf("the log holds a token:\n%s", log)
	}
	if !strings.Contains(log.String(), "request refused: no valid token") {
		t.Errorf("refusals are not logged:\n%s", log)
	}
}

func TestRequireTokenLeavesReadsOpen(t *testing.T) {
	f := newFake("a")
	ts, h, _, _ := authTester(t, f)
	for _, target := range []string{"/workflow-list", "/workflow-slots?id=a", "/workflow?id=a", "/healthz", "/openapi.json", "/version", "/metrics",
		"/rerun?id=a&time=2015-09-13T13:00Z"} {
		if rec := send(t, ts, h, "GET", target, ""); rec.Code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s", target, rec.Code, rec.Body)
		}
		if rec := send(t, ts, h, "HEAD", target, ""); rec.Code == http.StatusUnauthorized {
			t.Errorf("HEAD %s without a token: 401", target)
		}
	}
	// A wrong token on a read is ignored, not refused.
	if rec := send(t, ts, h, "GET", "/workflow-list", "", "Bearer nope"); rec.Code != http.StatusOK {
		t.Errorf("GET with a wrong token: %d", rec.Code)
	}
}

func TestRequireTokenRefusesEmptyToken(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("RequireToken(\"\") did not panic")
		}
	}()
	RequireToken("", http.NotFoundHandler(), nil)
}

// BenchmarkRequireTokenMismatch measures the refusal of a long token wrong
// in its first byte and one wrong in its last: with crypto/subtle's
// constant-time comparison the two take about as long (compare the
// sub-benchmarks by eye; a test asserting a ratio of timings would be flaky).
func BenchmarkRequireTokenMismatch(b *testing.B) {
	long := strings.Repeat("k", 1<<20) // long, so a byte-by-byte compare would show
	h := RequireToken(long, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
	for _, bc := range []struct{ name, auth string }{
		{"first-byte", "Bearer x" + long[1:]},
		{"last-byte", "Bearer " + long[:len(long)-1] + "x"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("POST", "/pause", nil)
				req.Header.Set("Authorization", bc.auth)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusUnauthorized {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tok, warn, err := LoadToken(write("ok", "  "+testToken+"\n", 0o600))
	if err != nil || tok != testToken || warn != "" {
		t.Errorf("LoadToken = %q, %q, %v", tok, warn, err)
	}
	if _, warn, err := LoadToken(write("open", testToken+"\n", 0o644)); err != nil || !strings.Contains(warn, "chmod 600") {
		t.Errorf("world-readable file: warn %q, err %v", warn, err)
	}
	// The warning says what other users can do: a group-writable file
	// was said to be readable.
	for mode, want := range map[os.FileMode]string{
		0o640: "can be read by other users (mode 0640); chmod 600 it",
		0o604: "can be read by other users (mode 0604); chmod 600 it",
		0o620: "can be changed by other users (mode 0620); chmod 600 it",
		0o666: "can be read and changed by other users (mode 0666); chmod 600 it",
		0o700: "",
		0o610: "",
	} {
		name := write(fmt.Sprintf("mode-%04o", mode), testToken+"\n", mode)
		_, warn, err := LoadToken(name)
		if want != "" {
			want = "auth token file " + name + " " + want
		}
		if err != nil || warn != want {
			t.Errorf("mode %04o: warn %q, want %q (%v)", mode, warn, want, err)
		}
	}
	for name, content := range map[string]string{
		"empty":      "",
		"blank":      " \n\n",
		"short":      "s3cret\n",
		"two lines":  testToken + "\n" + testToken + "\n",
		"space":      testToken[:16] + " " + testToken[16:],
		"non-ascii":  testToken + "é",
		"control":    testToken + "\x00",
		"huge":       strings.Repeat("a", 5000),
		"crlf token": testToken + "\r\nmore",
	} {
		_, _, err := LoadToken(write(strings.ReplaceAll(name, " ", "-"), content, 0o600))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if len(content) >= 8 && strings.Contains(err.Error(), content[:8]) && name != "huge" {
			t.Errorf("%s: the error quotes the file: %v", name, err)
		}
	}
	if _, _, err := LoadToken(dir); err == nil {
		t.Error("a directory was accepted")
	}
	if _, _, err := LoadToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was accepted")
	}
}
