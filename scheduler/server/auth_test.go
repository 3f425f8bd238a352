package server

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celos-go/celos/internal/testenv/servertest"
)

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "localhost": true, "LOCALHOST": true,
		"0.0.0.0": false, "::": false, "": false, "10.0.0.1": false, "192.168.1.1": false, "8.8.8.8": false,
		"::ffff:10.0.0.1": false, "fe80::1": false,
		"no-such-host.invalid": false, // does not resolve: not loopback
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestAuthTokenPolicy(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	// Loopback without a token: fine.
	if tok, err := authToken(authOptions{Listen: "127.0.0.1"}, log); err != nil || tok != "" {
		t.Errorf("loopback: %q %v", tok, err)
	}
	// Every interface without a token: refused, naming the way out.
	for _, addr := range []string{"0.0.0.0", "::", "10.1.2.3"} {
		_, err := authToken(authOptions{Listen: addr}, log)
		if err == nil || !strings.Contains(err.Error(), "refusing to listen") ||
			!strings.Contains(err.Error(), "--auth-token-file") || !strings.Contains(err.Error(), InsecureFlag) {
			t.Errorf("%s without a token: %v", addr, err)
		}
	}
	// ... unless the operator insists, which is logged as an error.
	var buf strings.Builder
	loud := slog.New(slog.NewTextHandler(&buf, nil))
	if tok, err := authToken(authOptions{Listen: "0.0.0.0", InsecureNoAuth: true}, loud); err != nil || tok != "" {
		t.Errorf("insecure flag: %q %v", tok, err)
	}
	if !strings.Contains(buf.String(), "level=ERROR") || !strings.Contains(buf.String(), "INSECURE") {
		t.Errorf("the insecure start is not logged loudly: %s", buf.String())
	}
	// A token file: used on any address; a bad one stops the start.
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	if tok, err := authToken(authOptions{Listen: "0.0.0.0", TokenFile: good}, log); err != nil || tok != "0123456789abcdef0123456789abcdef" {
		t.Errorf("token file: %q %v", tok, err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := authToken(authOptions{Listen: "127.0.0.1", TokenFile: short}, log); err == nil {
		t.Error("a short token was accepted")
	}
	if _, err := authToken(authOptions{Listen: "127.0.0.1", TokenFile: filepath.Join(dir, "missing")}, log); err == nil {
		t.Error("a missing token file was accepted")
	}
}

// TestRunWithToken starts the server with the real engine and a token:
// changes need it (the API and so the UI's actions), reads do not, the UI
// asks for a token before its first action, and the token is never logged.
func TestRunWithToken(t *testing.T) {
	dir := t.TempDir()
	const token = "tok-0123456789abcdef0123456789"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(dir, "wf")
	os.Mkdir(wf, 0o755)
	var stderr servertest.LockedBuffer
	cfg := Config{
		Workflows: wf, DB: filepath.Join(dir, "db"), Logs: filepath.Join(dir, "logs"),
		URLFile: filepath.Join(dir, "url"), Stderr: &stderr, Version: "test", AuthTokenFile: tokenFile,
	}
	base, _ := startRun(t, cfg, openEngine)

	do := func(method, path, auth string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for _, p := range []string{"POST /scheduler", "POST /clear-cache", "PUT /register?bucket=b&key=k", "DELETE /register?bucket=b&key=k", "POST /pause?id=x&paused=true"} {
		m, path, _ := strings.Cut(p, " ")
		code, body, h := do(m, path, "")
		if code != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, `"error"`) {
			t.Errorf("%s without a token: %d %s %v", p, code, body, h)
		}
		if code, _, _ := do(m, path, "Bearer wrong-token-wrong-token"); code != 401 {
			t.Errorf("%s with a wrong token: %d", p, code)
		}
	}
	if code, body, _ := do("POST", "/scheduler", "Bearer "+token); code != 200 {
		t.Errorf("POST /scheduler with the token: %d %s", code, body)
	}
	if code, body, _ := do("POST", "/pause?id=nope&paused=true", "Bearer "+token); code != 404 {
		t.Errorf("POST /pause of an unknown workflow with the token: %d %s (want 404: past the check)", code, body)
	}
	for _, p := range []string{"/workflow-list", "/healthz", "/metrics", "/ui"} {
		if code, _, _ := do("GET", p, ""); code != 200 {
			t.Errorf("GET %s without a token: %d", p, code)
		}
	}
	if _, page, _ := do("GET", "/ui", ""); !strings.Contains(page, `data-token-required="true"`) {
		t.Error("the UI does not ask for a token")
	}
	if strings.Contains(stderr.String(), token) || strings.Contains(stderr.String(), "wrong-token") {
		t.Errorf("a token was logged:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "auth=true") {
		t.Errorf("the start-up line does not say auth is on:\n%s", stderr.String())
	}
}
