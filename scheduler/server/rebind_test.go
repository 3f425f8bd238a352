package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/servertest"
)

// rawRequest sends one request line and header block as written (so that
// Host can be anything, or missing with HTTP/1.0) and returns the status
// code and body of the answer.
func rawRequest(t *testing.T, addr, requestLine string, headers ...string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	var b strings.Builder
	b.WriteString(requestLine + "\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %v: %v", requestLine, headers, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// startServer runs the real server (engine, API, UI) with cfg's
// directories filled in under a temporary directory and returns its
// host:port.
func startServer(t *testing.T, cfg Config) string {
	t.Helper()
	dir := t.TempDir()
	cfg.Workflows = filepath.Join(dir, "wf")
	if err := os.Mkdir(cfg.Workflows, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.DB, cfg.Logs, cfg.URLFile = filepath.Join(dir, "db"), filepath.Join(dir, "logs"), filepath.Join(dir, "url")
	cfg.Stderr, cfg.Version = &servertest.LockedBuffer{}, "test"
	url, _ := startRun(t, cfg, openEngine)
	return strings.TrimPrefix(url, "http://")
}

// TestRunRefusesForeignHostWithoutToken: a server without a token (the
// loopback default) answers only requests whose Host is a loopback name or
// address, so that a page of another site whose name the attacker made
// resolve to 127.0.0.1 (DNS rebinding) can neither change state nor read
// it. The checks are made with raw requests on a real connection.
func TestRunRefusesForeignHostWithoutToken(t *testing.T) {
	addr := startServer(t, Config{Listen: "127.0.0.1"})
	_, port, _ := net.SplitHostPort(addr)
	requests := []string{"POST /pause?id=nope&paused=true HTTP/1.1", "POST /rerun?id=nope&time=2015-09-13T13:00Z HTTP/1.1",
		"POST /scheduler HTTP/1.1", "GET /workflow-list HTTP/1.1", "GET /ui HTTP/1.1", "GET /metrics HTTP/1.1"}
	refused := []string{
		"rebind.attacker.example", "rebind.attacker.example:" + port, "127.0.0.1.nip.io", "127.0.0.1.nip.io:" + port,
		"localhost.attacker.example", "localhost.", "attacker-localhost", "127.0.0.1.", "0x7f.1", "2130706433",
		"10.0.0.1", "[fe80::1]", "[::ffff:10.0.0.1]:" + port, "0.0.0.0",
	}
	for _, host := range refused {
		for _, rl := range requests {
			code, body := rawRequest(t, addr, rl, "Host: "+host)
			var e struct{ Error, Code string }
			if code != http.StatusMisdirectedRequest || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, "Host") || e.Code != "misdirected" {
				t.Errorf("%s with Host %s: %d %s (want 421 with a JSON error naming Host, code misdirected)", rl, host, code, body)
			}
		}
	}
	allowed := []string{"127.0.0.1", "127.0.0.1:" + port, "127.1.2.3:" + port, "localhost", "localhost:" + port,
		"LOCALHOST:" + port, "LocalHost", "[::1]", "[::1]:" + port}
	for _, host := range allowed {
		// Past the check: an unknown workflow is 404, a read is 200.
		if code, body := rawRequest(t, addr, "POST /pause?id=nope&paused=true HTTP/1.1", "Host: "+host); code != http.StatusNotFound {
			t.Errorf("POST /pause with Host %s: %d %s (want 404: past the Host check)", host, code, body)
		}
		if code, body := rawRequest(t, addr, "GET /workflow-list HTTP/1.1", "Host: "+host); code != http.StatusOK {
			t.Errorf("GET /workflow-list with Host %s: %d %s", host, code, body)
		}
	}
	// The absolute form of the request target names the host too (a
	// browser behind an HTTP proxy sends it): it wins over Host.
	if code, body := rawRequest(t, addr, "POST http://rebind.attacker.example:"+port+"/pause?id=nope&paused=true HTTP/1.1", "Host: 127.0.0.1:"+port); code != http.StatusMisdirectedRequest {
		t.Errorf("absolute-form target with a foreign host: %d %s (want 421)", code, body)
	}
	// HTTP/1.0 without Host: no browser sends that (a rebinding page
	// always has a Host), so old probes and scripts keep working.
	if code, body := rawRequest(t, addr, "GET /healthz HTTP/1.0"); code != http.StatusOK {
		t.Errorf("HTTP/1.0 without Host: %d %s", code, body)
	}
	// The CLI and the UI use the URL the server announces.
	resp, err := http.Get("http://" + addr + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ui at %s: %d", addr, resp.StatusCode)
	}
}

// TestRunWithTokenAcceptsAnyHost: with a token the Host is not checked
// (a token server is meant to be reached by its names; changes need the
// token, which a rebinding page does not have).
func TestRunWithTokenAcceptsAnyHost(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "tok-0123456789abcdef0123456789"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, Config{Listen: "127.0.0.1", AuthTokenFile: tokenFile})
	var got []int
	for _, h := range []string{"celos.example.com", "rebind.attacker.example"} {
		code, _ := rawRequest(t, addr, "GET /workflow-list HTTP/1.1", "Host: "+h)
		got = append(got, code)
		code, _ = rawRequest(t, addr, "POST /pause?id=nope&paused=true HTTP/1.1", "Host: "+h, "Authorization: Bearer "+token)
		got = append(got, code)
		code, _ = rawRequest(t, addr, "POST /pause?id=nope&paused=true HTTP/1.1", "Host: "+h)
		got = append(got, code)
	}
	if diff := cmp.Diff([]int{200, 404, 401, 200, 404, 401}, got); diff != "" {
		t.Errorf("status codes with a token (-want +got):\n%s", diff)
	}
}

// TestHostAllowed is the Host policy without a token, on a loopback
// listener and on a public one (--insecure-no-auth-on-public-address:
// IP literals only, as a rebinding attack needs a name).
func TestHostAllowed(t *testing.T) {
	loop := hostPolicy("127.0.0.1", "")
	public := hostPolicy("0.0.0.0", "")
	named := hostPolicy("celos.internal", "")
	if hostPolicy("0.0.0.0", "a-token-a-token-a-token") != nil {
		t.Error("a server with a token checks Host")
	}
	var got []string
	for _, h := range []string{"", "localhost", "LOCALHOST:8080", "127.0.0.1:80", "[::1]:8080", "[::1]", "::1",
		"10.0.0.1:8080", "[2001:db8::1]:8080", "celos.internal:8080", "CELOS.internal", "rebind.attacker.example:8080",
		"127.0.0.1.nip.io", "[::1", "localhost:", ":8080", "[fe80::1%25eth0]:8080"} {
		got = append(got, fmt.Sprintf("%s %v %v %v", h, loop(h), public(h), named(h)))
	}
	want := []string{
		" true true true", "localhost true true true", "LOCALHOST:8080 true true true", "127.0.0.1:80 true true true",
		"[::1]:8080 true true true", "[::1] true true true", "::1 true true true",
		"10.0.0.1:8080 false true true", "[2001:db8::1]:8080 false true true",
		"celos.internal:8080 false false true", "CELOS.internal false false true",
		"rebind.attacker.example:8080 false false false", "127.0.0.1.nip.io false false false",
		"[::1 false false false", "localhost: true true true", ":8080 false false false",
		"[fe80::1%25eth0]:8080 false false false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("host, allowed on loopback, on 0.0.0.0, on celos.internal (-want +got):\n%s", diff)
	}
}

// TestErrorAnswersOnTheWire: on a real server and connection, the
// refusals before the API (cross-site, no token) and the API's own are
// JSON with their code; the UI's pages answer HTML (a browser is their
// client); and what Go's HTTP server answers before any handler (headers
// over --max-header-bytes) is its own plain text, as docs/server.md says.
func TestErrorAnswersOnTheWire(t *testing.T) {
	addr := startServer(t, Config{Listen: "127.0.0.1"})
	host := "Host: " + addr
	for _, c := range []struct {
		request string
		headers []string
		status  int
		code    string
	}{
		{"POST /pause?id=nope&paused=true HTTP/1.1", []string{"Sec-Fetch-Site: cross-site", "Origin: https://evil.example"}, 403, "cross_site"},
		{"POST /nope HTTP/1.1", nil, 404, "unknown_endpoint"},
		{"PATCH /workflow-list HTTP/1.1", nil, 405, "method_not_allowed"},
		{"GET /slot-state?id=nope HTTP/1.1", nil, 400, "bad_request"},
	} {
		code, body := rawRequest(t, addr, c.request, append([]string{host}, c.headers...)...)
		var e struct{ Error, Code string }
		if code != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Code != c.code {
			t.Errorf("%s %v: %d %s, want %d with code %s", c.request, c.headers, code, body, c.status, c.code)
		}
	}
	if code, body := rawRequest(t, addr, "GET /ui/workflow?id=nope HTTP/1.1", host); code != 404 || !strings.Contains(body, "<html") {
		t.Errorf("GET /ui/workflow of an unknown workflow: %d %.200s, want an HTML 404", code, body)
	}
	if code, body := rawRequest(t, addr, "GET /workflow-list HTTP/1.1", host, "X-Big: "+strings.Repeat("x", maxHeaderBytes+8192)); code != 431 {
		t.Errorf("headers over the limit: %d %.200s, want Go's 431", code, body)
	}
}
