package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// TestClientRedirectKeepsToken: a server that redirects the client to
// another port of the same host (another service) or to plain http must
// not receive the token there; the client does not follow a redirect at
// all (the API never redirects) and says where it was sent.
func TestClientRedirectKeepsToken(t *testing.T) {
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, r.Method+" "+r.URL.Path+" "+a)
		}
		w.Write([]byte(`{"ids":["x"],"loadErrors":[]}`))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusTemporaryRedirect
		if r.Method == "POST" {
			code = http.StatusFound // Go's client resends it as a GET
		}
		http.Redirect(w, r, other.URL+r.URL.Path, code)
	}))
	defer srv.Close()
	t.Setenv("CELOS_TOKEN", "s3cret")
	for _, args := range [][]string{{"workflows"}, {"pause", "--id", "a"}} {
		var out, errs strings.Builder
		code := run(append(args, "--server", srv.URL), &out, &errs)
		want := "redirected to " + other.URL
		if code != ExitFailure || !strings.Contains(errs.String(), want) || !strings.Contains(errs.String(), srv.URL) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and an error with %q", args, code, out.String(), errs.String(), want)
		}
	}
	if len(leaked) > 0 {
		t.Errorf("the token reached the other server: %q", leaked)
	}
}

// TestClientSuccessAnswerEscapes: the strings of a 2xx answer (workflow
// ids, load errors, slot statuses and external IDs, unreadable slots'
// reasons, trigger descriptions, attempts, what pause, rerun and step
// answer) reach the terminal with their
// control characters escaped, as an error answer's message does.
func TestClientSuccessAnswerEscapes(t *testing.T) {
	const esc = "\x1b]0;owned\x07\x1b[2J"
	answers := map[string]string{
		"/workflow-list":  `{"ids":["wf` + jsonEsc(esc) + `"],"loadErrors":[{"file":"f` + jsonEsc(esc) + `.cue","error":"bad` + jsonEsc(esc) + `"}]}`,
		"/workflow-slots": `{"paused":false,"slots":[{"time":"2015-09-13T13:00:00.000Z","status":"SUCCESS` + jsonEsc(esc) + `","retryCount":0,"externalID":"job` + jsonEsc(esc) + `"}],"unreadable":[{"time":"2015-09-13T12:00:00.000Z","error":"torn` + jsonEsc(esc) + `"}]}`,
		"/trigger-status": `{"type":"hdfs` + jsonEsc(esc) + `","ready":false,"description":"path` + jsonEsc(esc) + `","error":"e` + jsonEsc(esc) + `","held":{"op":"pool","reason":"r` + jsonEsc(esc) + `"}}`,
		"/pause":          `{"id":"a` + jsonEsc(esc) + `","paused":true}`,
		"/rerun":          `{"time":"2015-09-13T13:00:00.000Z` + jsonEsc(esc) + `","status":"WAITING` + jsonEsc(esc) + `","retryCount":0,"externalID":null}`,
		"/scheduler":      `{"time":"2015-09-13T13:00:00.000Z` + jsonEsc(esc) + `","unknownIDs":["b` + jsonEsc(esc) + `"],"loadErrors":[{"file":"f` + jsonEsc(esc) + `.cue","error":"bad` + jsonEsc(esc) + `"}]}`,
		"/slot-attempts":  `{"slot":{"time":"2015-09-13T13:00:00.000Z","status":"FAIL` + jsonEsc(esc) + `","retryCount":0},"attempts":[{"status":"KILLED` + jsonEsc(esc) + `","externalID":"job` + jsonEsc(esc) + `"}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(answers[r.URL.Path]))
	}))
	defer srv.Close()
	for _, args := range [][]string{
		{"workflows"},
		{"slots", "--id", "a"},
		{"trigger-status", "--id", "a", "--time", "2015-09-13T13:00Z"},
		{"attempts", "--id", "a", "--time", "2015-09-13T13:00Z"},
		{"pause", "--id", "a"},
		{"rerun", "--id", "a", "--time", "2015-09-13T13:00Z"},
		{"step"},
	} {
		var out, errs strings.Builder
		run(append(args, "--server", srv.URL), &out, &errs)
		if strings.ContainsAny(out.String()+errs.String(), "\x1b\x07") {
			t.Errorf("%v: raw escape on the terminal:\nstdout %q\nstderr %q", args, out.String(), errs.String())
		}
		if !strings.Contains(out.String()+errs.String(), `\x1b]0;owned\a\x1b[2J`) {
			t.Errorf("%v: the escaped string is not shown:\nstdout %q\nstderr %q", args, out.String(), errs.String())
		}
	}
}

// jsonEsc writes s's control characters as JSON \u escapes.
func jsonEsc(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestClientEndlessAnswer: a server that answers without end (a 200 whose
// body never stops, or an error page of the same kind) makes the command
// fail with an error that says the answer is too large and names the
// server, having held a bounded amount of memory; nothing of the answer
// is printed as if it were complete (--json).
func TestClientEndlessAnswer(t *testing.T) {
	chunk := []byte(strings.Repeat("A", 64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/pause" {
			w.WriteHeader(http.StatusBadGateway)
		}
		w.Write([]byte(`{"ids":["`))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"workflows", "--json"}, "celos: GET /workflow-list: the answer of the celos server at " + srv.URL + " is larger than 64 MiB: not a celos answer\n"},
		{[]string{"pause", "--id", "a"}, "celos: POST /pause: 502 Bad Gateway: not a celos answer (more than 8 MiB): \"{\\\"ids\\\":[\\\"" + strings.Repeat("A", 200-len(`{"ids":["`)) + "...\"\n"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var out, errs strings.Builder
		code := run(append(tc.args, "--server", srv.URL), &out, &errs)
		runtime.ReadMemStats(&after)
		if code != ExitFailure || out.Len() != 0 || errs.String() != tc.want {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q\nwant exit 1, no stdout, stderr %q", tc.args, code, out.Len(), clipForTest(errs.String()), tc.want)
		}
		t.Logf("%v: allocated %d MiB", tc.args, (after.TotalAlloc-before.TotalAlloc)>>20)
		if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
			t.Errorf("%v: allocated %d MiB reading the answer, want at most 256", tc.args, got>>20)
		}
	}
}

// TestClientServerNeverAnswers: a server that accepts the connection and
// never answers (or stops in the middle of its answer) makes the command
// fail after the call's timeout with an error that names the server and
// the timeout, not with "cannot reach ...: context deadline exceeded".
func TestClientServerNeverAnswers(t *testing.T) {
	defer func(d time.Duration) { callTimeout = d }(callTimeout)
	callTimeout = 500 * time.Millisecond
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/workflow-slots" {
			w.Write([]byte(`{"slots":[`))
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"workflows"}, "celos: GET /workflow-list: no answer from the celos server at " + srv.URL + " within 500ms (--server, CELOS_SERVER)\n"},
		{[]string{"slots", "--id", "a"}, "celos: GET /workflow-slots: the celos server at " + srv.URL + " did not finish its answer within 500ms\n"},
	} {
		var out, errs strings.Builder
		code := run(append(tc.args, "--server", srv.URL), &out, &errs)
		if code != ExitFailure || errs.String() != tc.want {
			t.Errorf("%v: exit %d, stderr %q\nwant exit 1, stderr %q", tc.args, code, errs.String(), tc.want)
		}
	}
}

// TestClientServerURLPasswordNotShown: a password in --server (basic
// authentication for a proxy in front of celos) is not printed in the
// client's errors (which end up in CI logs), as Go's own errors redact it.
func TestClientServerURLPasswordNotShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, server := range []string{"http://admin:pw0rd@127.0.0.1:1", "http://admin:pw0rd@" + host} {
		var out, errs strings.Builder
		code := run([]string{"workflows", "--server", server}, &out, &errs)
		if code != ExitFailure || strings.Contains(errs.String(), "pw0rd") || !strings.Contains(errs.String(), "admin:xxxxx@") {
			t.Errorf("--server %s: exit %d, stderr %q; want exit 1 and the password shown as xxxxx", server, code, errs.String())
		}
	}
}

// TestClientAnswerNotJSON: a 200 that is not celos's JSON (--server names
// another web server: its HTML page; a truncated answer) fails naming the
// server and showing the start of what came, its control characters
// escaped.
func TestClientAnswerNotJSON(t *testing.T) {
	page := "<html>\x1b[2JWelcome to nginx!</html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/workflow-slots" {
			w.Write([]byte(`{"slots":[{"time":"2015-09-13T13:00:00.000Z","sta`))
			return
		}
		w.Write([]byte(page))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"workflows"}, "celos: GET /workflow-list: the answer of the celos server at " + srv.URL + " is not celos's JSON (invalid character '<' looking for beginning of value): " + fmt.Sprint(len(page)) + ` bytes: "<html>\x1b[2JWelcome to nginx!</html>"` + "\n"},
		{[]string{"slots", "--id", "a", "--json"}, "celos: GET /workflow-slots: the answer of the celos server at " + srv.URL + ` is not celos's JSON (unexpected end of JSON input): 49 bytes: "{\"slots\":[{\"time\":\"2015-09-13T13:00:00.000Z\",\"sta"` + "\n"},
	} {
		var out, errs strings.Builder
		code := run(append(tc.args, "--server", srv.URL), &out, &errs)
		if code != ExitFailure || out.Len() != 0 || errs.String() != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 1, stderr %q", tc.args, code, out.String(), errs.String(), tc.want)
		}
	}
}

// TestClientTokenControlCharacter: a token with a control character (from
// --token-file or CELOS_TOKEN) is a usage error that names where it came
// from, without showing it, before any request; not "cannot reach the
// celos server".
func TestClientTokenControlCharacter(t *testing.T) {
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests++ }))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3\x01cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env, flag, want string
	}{
		{"s3\x01cret", "", "celos: CELOS_TOKEN: want one line holding the token, without control characters\n"},
		{"", file, "celos: --token-file " + file + ": want one line holding the token, without control characters\n"},
	} {
		t.Setenv("CELOS_TOKEN", tc.env)
		args := []string{"pause", "--id", "a", "--server", srv.URL}
		if tc.flag != "" {
			args = append(args, "--token-file", tc.flag)
		}
		var out, errs strings.Builder
		code := run(args, &out, &errs)
		if code != ExitUsage || errs.String() != tc.want {
			t.Errorf("%v: exit %d, stderr %q\nwant exit %d, stderr %q", args, code, errs.String(), ExitUsage, tc.want)
		}
	}
	if requests != 0 {
		t.Errorf("%d requests reached the server", requests)
	}
}

// TestClientDeepTriggerTree: a trigger-status answer nested thousands of
// levels deep (a few hundred KB from a hostile server; a real tree is a
// handful of levels) does not make the client print its indentation, the
// square of the depth: the tree is shown to a bounded depth and what is
// below is counted.
func TestClientDeepTriggerTree(t *testing.T) {
	const depth = 4900
	body := strings.Repeat(`{"type":"and","ready":false,"description":"d","subStatuses":[`, depth) + `{"type":"hdfs","ready":true,"description":"leaf"}` + strings.Repeat(`]}`, depth)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
	defer srv.Close()
	var out, errs strings.Builder
	code := run([]string{"trigger-status", "--id", "a", "--time", "2015-09-13T13:00Z", "--server", srv.URL}, &out, &errs)
	if code != 0 || out.Len() > 64<<10 || !strings.Contains(out.String(), "\n"+strings.Repeat("  ", 32)+"... 4869 triggers below not shown (--json shows them)\n") {
		t.Errorf("exit %d, stdout %d bytes (want at most 64 KiB, with a line saying triggers are not shown): %q, stderr %q", code, out.Len(), clipForTest(out.String()), errs.String())
	}
}

// TestClientJSONEscapesDELAndC1: --json printed the server's answer as it
// came, and valid JSON carries DEL, the C1 controls (U+0080-U+009F; U+009B
// is CSI to some terminals) and bytes that are not UTF-8 raw. Every
// command's --json now writes them as \u escapes; the JSON still decodes
// to what the server sent.
func TestClientJSONEscapesDELAndC1(t *testing.T) {
	const raw = "a\x7fb\u0085c\u009b2Jd\xc2"
	s := func(v string) string { return `"` + v + raw + `"` }
	answers := map[string]string{
		"/workflow-list":  `{"ids":[` + s("wf") + `],"loadErrors":[{"file":` + s("f") + `,"error":` + s("bad") + `}]}`,
		"/workflow":       `{"id":"a","startTime":"2015-09-13T00:00:00.000Z"}`,
		"/workflow-slots": `{"paused":false,"slots":[{"time":"2015-09-13T13:00:00.000Z","status":` + s("SUCCESS") + `,"retryCount":0,"externalID":` + s("job") + `}],"unreadable":[{"time":"2015-09-13T12:00:00.000Z","error":` + s("torn") + `}]}`,
		"/trigger-status": `{"type":` + s("hdfs") + `,"ready":false,"description":` + s("path") + `}`,
		"/slot-attempts":  `{"slot":{"time":"2015-09-13T13:00:00.000Z","status":` + s("FAIL") + `,"retryCount":0},"attempts":[]}`,
		"/pause":          `{"id":` + s("a") + `,"paused":true}`,
		"/rerun":          `{"time":"2015-09-13T13:00:00.000Z","status":` + s("WAITING") + `,"retryCount":0,"externalID":null}`,
		"/kill":           `{"time":"2015-09-13T13:00:00.000Z","status":` + s("KILLED") + `,"retryCount":0,"externalID":null}`,
		"/scheduler":      `{"time":"2015-09-13T13:00:00.000Z","unknownIDs":[],"loadErrors":[{"file":` + s("f") + `,"error":` + s("bad") + `}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(answers[r.URL.Path]))
	}))
	defer srv.Close()
	for _, args := range [][]string{
		{"workflows"},
		{"slots", "--id", "a"},
		{"trigger-status", "--id", "a", "--time", "2015-09-13T13:00Z"},
		{"attempts", "--id", "a", "--time", "2015-09-13T13:00Z"},
		{"pause", "--id", "a"},
		{"rerun", "--id", "a", "--time", "2015-09-13T13:00Z"},
		{"rerun", "--id", "a", "--from", "2015-09-13T12:00Z", "--to", "2015-09-13T13:00Z", "--dry-run"},
		{"kill", "--id", "a", "--time", "2015-09-13T13:00Z"},
		{"step"},
	} {
		var out, errs strings.Builder
		// workflows and step exit 1 for the load errors, after the JSON.
		run(append(args, "--json", "--server", srv.URL), &out, &errs)
		got := out.String()
		for i, r := range got {
			if r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r == utf8.RuneError && !strings.HasPrefix(got[i:], "\uFFFD")) {
				t.Errorf("%v: raw %q at byte %d of the output:\n%q", args, r, i, got)
				break
			}
		}
		// The byte that is not UTF-8 is U+FFFD, escaped or (re-encoded
		// by the client, rerun --from) not.
		if !strings.Contains(got, `a\u007fb\u0085c\u009b2Jd\ufffd`) && !strings.Contains(got, `a\u007fb\u0085c\u009b2Jd`+"\uFFFD") {
			t.Errorf("%v: the escaped string is not shown:\n%q\nstderr: %s", args, got, errs.String())
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%v: the output is not JSON:\n%s", args, got)
		}
	}
}

// TestEscapeJSONControlsKeepsTheValue: the escaped JSON decodes to the
// same value; what needs no escape (other non-ASCII text, escapes already
// there) is left as it is.
func TestEscapeJSONControlsKeepsTheValue(t *testing.T) {
	in := []byte("{\"k\x7f\": [\"é\u0080ü\u009f\u00a0\xff\", \"\\u009b ok\", 1.5e3, null, \"日本\u2028\"]}")
	got := escapeJSONControls(in)
	want := "{\"k\\u007f\": [\"é\\u0080ü\\u009f\u00a0\\ufffd\", \"\\u009b ok\", 1.5e3, null, \"日本\u2028\"]}"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var a, b any
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("decoded (-in +escaped):\n%s", diff)
	}
	if plain := []byte(`{"a":"b"}`); &escapeJSONControls(plain)[0] != &plain[0] {
		t.Error("an answer with nothing to escape was copied")
	}
}

// TestClientBadServerNamesItsSource: a malformed server URL from
// CELOS_SERVER was reported as --server's, a flag the user never gave;
// and a malformed URL was shown with its password.
func TestClientBadServerNamesItsSource(t *testing.T) {
	t.Setenv("CELOS_SERVER", "localhost:8080")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"workflows"}, `celos: CELOS_SERVER "localhost:8080": want an http:// or https:// URL such as http://127.0.0.1:8080` + "\n"},
		{[]string{"workflows", "--server", "ftp://x"}, `celos: --server "ftp://x": want an http:// or https:// URL such as http://127.0.0.1:8080` + "\n"},
		// Nor is a password in it shown, parsable or not.
		{[]string{"workflows", "--server", "ftp://u:s3cr3t@x"}, `celos: --server "ftp://u:xxxxx@x": want an http:// or https:// URL such as http://127.0.0.1:8080` + "\n"},
		{[]string{"workflows", "--server", "http://u:s3cr3t@[::1"}, `celos: --server "http://u:xxxxx@[::1": want an http:// or https:// URL such as http://127.0.0.1:8080` + "\n"},
		{[]string{"workflows", "--server", "u:s3cr3t@h:80"}, `celos: --server "u:xxxxx@h:80": want an http:// or https:// URL such as http://127.0.0.1:8080` + "\n"},
	} {
		var out, errs strings.Builder
		if code := run(tc.args, &out, &errs); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, ExitUsage)
		}
		if got := firstLine(errs.String()); got != tc.want {
			t.Errorf("%v: stderr %q, want %q", tc.args, errs.String(), tc.want)
		}
	}
}

// firstLine is s up to and with its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return s
}
