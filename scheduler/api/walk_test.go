package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/api"
)

// TestEveryErrorAnswerHasACode walks every path of the API with every
// method, with and without a token on the server, plainly, through a
// foreign Host, from another site and without the token, and some paths
// it does not serve: every answer that is not a success is a JSON error
// whose code is one of the table's (api.ErrorCodes), valid against
// openapi.json, with the status the checks before the handler give.
func TestEveryErrorAnswerHasACode(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	const token = "0123456789abcdef0123"
	hostOK := func(host string) bool { return host == "127.0.0.1" }
	codes := api.ErrorCodes()
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}
	routes := api.Routes(s.h)
	paths := []string{"/nope", "/workflow-list/", "/Workflow-List", "/ui-nope", "/scheduler/x", "/openapi.json.bak"}
	for p := range routes {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, tok := range []string{"", token} {
		h := api.Protect(s.h, tok, hostOK, nil)
		if tok != "" {
			h = api.Protect(s.h, tok, nil, nil) // a server with a token answers any Host
		}
		for _, path := range paths {
			for _, m := range methods {
				for _, how := range []string{"plain", "foreign Host", "cross-site", "no token"} {
					req := httptest.NewRequest(m, path, strings.NewReader(""))
					req.Host = "127.0.0.1"
					if tok != "" && how != "no token" {
						req.Header.Set("Authorization", "Bearer "+token)
					}
					switch how {
					case "foreign Host":
						req.Host = "rebind.example"
					case "cross-site":
						req.Header.Set("Sec-Fetch-Site", "cross-site")
						req.Header.Set("Origin", "https://evil.example")
					}
					changing := m != "GET" && m != "HEAD"
					safe := m == "GET" || m == "HEAD" || m == "OPTIONS"
					want := 0 // any status
					switch {
					case how == "foreign Host" && tok == "":
						want = http.StatusMisdirectedRequest
					case how == "cross-site" && !safe:
						want = http.StatusForbidden
					case tok != "" && how == "no token" && changing:
						want = http.StatusUnauthorized
					case routes[path] == nil:
						want = http.StatusNotFound
					case !slices.Contains(routes[path], m):
						want = http.StatusMethodNotAllowed
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					what := m + " " + path + " (" + how + ", token " + map[bool]string{true: "set", false: "none"}[tok != ""] + ")"
					if want != 0 && rec.Code != want {
						t.Errorf("%s: %d, want %d: %s", what, rec.Code, want, rec.Body)
					}
					if rec.Code < 300 {
						continue
					}
					checkCoded(t, what, rec.Code, rec.Header(), rec.Body.Bytes(), codes)
					api.CheckAnswer(t, m, path, rec)
				}
			}
		}
	}
}

// checkCoded: an error answer is application/json with a code of the
// table.
func checkCoded(t *testing.T, what string, status int, hdr http.Header, body []byte, codes []string) {
	t.Helper()
	var e struct{ Error, Code string }
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: %d with Content-Type %q, want application/json: %s", what, status, ct, body)
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || !slices.Contains(codes, e.Code) {
		t.Errorf("%s: %d %s: want a JSON error with a code of %v", what, status, body, codes)
	}
}

// TestBodyTimeout: a PUT /register whose body does not arrive within the
// server's read timeout is answered 408, code request_timeout, on a real
// connection.
func TestBodyTimeout(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	srv := httptest.NewUnstartedServer(s.h)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 100 bytes announced, one sent.
	if _, err := conn.Write([]byte("PUT /register?bucket=b&key=k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	rec := httptest.NewRecorder()
	for k, v := range resp.Header {
		rec.Header()[k] = v
	}
	rec.WriteHeader(resp.StatusCode)
	if _, err := rec.Body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusRequestTimeout {
		t.Fatalf("%d %s, want 408", rec.Code, rec.Body)
	}
	checkCoded(t, "PUT /register, body late", rec.Code, rec.Header(), rec.Body.Bytes(), []string{"request_timeout"})
	api.CheckAnswer(t, "PUT", "/register", rec)
}

// TestChecksWithoutLogger: the checks before the handler, used one by
// one without a logger, refuse with their codes (and do not panic).
func TestChecksWithoutLogger(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		h    http.Handler
		code string
	}{
		{api.CheckHost(ok, func(string) bool { return false }, nil), "misdirected"},
		{api.RefuseCrossOrigin(ok, nil), "cross_site"},
	} {
		req := httptest.NewRequest("POST", "/pause?id=a&paused=true", nil)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		checkCoded(t, c.code, rec.Code, rec.Header(), rec.Body.Bytes(), []string{c.code})
	}
}

// TestHeadOfGetRoutes: HEAD is answered on every GET route as GET would
// be, without a body (monitors and proxies probe /healthz with HEAD), and
// a 405's Allow header lists it.
func TestHeadOfGetRoutes(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	srv := httptest.NewServer(s.h)
	defer srv.Close()
	for _, path := range []string{"/healthz", "/workflow-list", "/openapi.json", "/version"} {
		get, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		get.Body.Close()
		head, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatalf("HEAD %s: %v", path, err)
		}
		body, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") || len(body) != 0 {
			t.Errorf("HEAD %s: %d %q body %q; GET answered %d %q", path, head.StatusCode,
				head.Header.Get("Content-Type"), body, get.StatusCode, get.Header.Get("Content-Type"))
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.Header.Get("Allow"), "GET, HEAD"; resp.StatusCode != http.StatusMethodNotAllowed || got != want {
		t.Errorf("DELETE /healthz: %d, Allow %q; want 405, Allow %q", resp.StatusCode, got, want)
	}
}
