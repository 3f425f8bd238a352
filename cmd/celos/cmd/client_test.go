package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// TestClientSendsToken checks the bearer-token hook: CELOS_TOKEN, when set,
// goes out as "Authorization: Bearer <token>" on every call, and not
// otherwise.
func TestClientSendsToken(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/workflow-list":
			w.Write([]byte(`{"ids":["a"],"loadErrors":[]}`))
		case "/pause":
			w.Write([]byte(`{"id":"a","paused":true}`))
		}
	}))
	defer srv.Close()

	t.Setenv("CELOS_SERVER", srv.URL)
	t.Setenv("CELOS_TOKEN", "s3cret")
	var out, errb bytes.Buffer
	if code := run([]string{"workflows"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if code := run([]string{"pause", "--id", "a"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	t.Setenv("CELOS_TOKEN", "")
	run([]string{"workflows"}, &out, &errb)
	want := "GET /workflow-list Bearer s3cret|POST /pause Bearer s3cret|GET /workflow-list "
	if strings.Join(got, "|") != want {
		t.Errorf("requests:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	if out.String() != "a\na: paused\na\n" {
		t.Errorf("output %q", out.String())
	}
}

// rerunServer is the real API (engine and file state database in a temp
// dir) of one project, on a fixed clock, behind a listener that counts the
// requests it receives by "METHOD /path".
type rerunServer struct {
	url string
	mu  sync.Mutex
	got map[string]int
	// breakAfter, when > 0, makes the server unreachable (listener closed,
	// the connection of that request dropped unanswered) at the
	// breakAfter-th POST /rerun.
	breakAfter int
	// rewrite, when set, replaces the body of each error answer of
	// /rerun (a server of another version).
	rewrite func(t *testing.T, body []byte) []byte
	srv     *httptest.Server
}

func newRerunServer(t *testing.T, now time.Time, wfs ...workflow.Workflow) *rerunServer {
	t.Helper()
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows")
	fixture.WriteProject(t, wf, "demo", wfs...)
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	eng, err := engine.New(engine.Options{WorkflowsDir: wf, Store: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(eng, api.Options{Now: func() time.Time { return now }})
	s := &rerunServer{got: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		key := r.Method + " " + r.URL.Path
		s.got[key]++
		broken := s.breakAfter > 0 && key == "POST /rerun" && s.got[key] >= s.breakAfter
		s.mu.Unlock()
		if broken {
			s.srv.Listener.Close()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if s.rewrite == nil || r.URL.Path != "/rerun" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code >= 400 {
			body = s.rewrite(t, body)
		}
		w.Header().Set("Content-Type", rec.Header().Get("Content-Type"))
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	t.Cleanup(s.srv.Close)
	s.url = s.srv.URL
	return s
}

// count is how many requests METHOD /path the server received.
func (s *rerunServer) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[key]
}

// runRerun runs celos rerun against s and returns its exit code, stdout
// and stderr.
func runRerun(t *testing.T, s *rerunServer, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"rerun", "--server", s.url}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// rerunNow is the server's clock in the rerun tests.
var rerunNow = time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)

// TestRerunRangeIntoTheFuture: a backfill whose --to lies 30 days after
// the server's clock reruns the 4 due slots and stops at the first slot
// the server refuses as not due yet: 5 POST /rerun, not one per slot of
// the range (721), and one line for the 717 slots skipped. A range partly
// in the future is not an error (exit 0); the dry run asks as few.
func TestRerunRangeIntoTheFuture(t *testing.T) {
	w := fixture.Hourly("hourly")
	w.StartTime = time.Date(2015, 9, 13, 10, 0, 0, 0, time.UTC)
	s := newRerunServer(t, rerunNow, w)

	code, out, errs := runRerun(t, s, "--id", "hourly", "--from", "2015-09-13T10:00Z", "--to", "2015-10-13T10:00Z", "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s%s", code, out, errs)
	}
	if n := s.count("GET /rerun"); n != 5 {
		t.Errorf("dry run: GET /rerun received %d times, want 5 (4 due slots, then the first not due)", n)
	}
	checkNotDueBackfill(t, s)
}

// TestRerunRangeOldServer: a server of the previous version answers its
// refusals without code or serverTime, {"error": "..."} only. The
// backfill still stops at the first slot not due yet, finding the
// server's time in the message (notDueRE, the fallback), with the same
// rows as against a current server.
func TestRerunRangeOldServer(t *testing.T) {
	w := fixture.Hourly("hourly")
	w.StartTime = time.Date(2015, 9, 13, 10, 0, 0, 0, time.UTC)
	s := newRerunServer(t, rerunNow, w)
	s.rewrite = func(t *testing.T, body []byte) []byte {
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Code != "not_due" {
			t.Errorf("the server's refusal is not a not_due answer (%v): %s", err, body)
		}
		old, _ := json.MarshalIndent(map[string]string{"error": e.Error}, "", "  ")
		return old
	}
	checkNotDueBackfill(t, s)
}

// TestRerunRangeCodeNotWording: a server that answers code not_due and
// serverTime is believed whatever its message says: the backfill stops at
// the first slot so refused and shows the serverTime given, not a time in
// the message.
func TestRerunRangeCodeNotWording(t *testing.T) {
	w := fixture.Hourly("hourly")
	w.StartTime = time.Date(2015, 9, 13, 10, 0, 0, 0, time.UTC)
	s := newRerunServer(t, rerunNow, w)
	s.rewrite = func(t *testing.T, body []byte) []byte {
		if !strings.Contains(string(body), `"code": "not_due"`) || !strings.Contains(string(body), `"serverTime": "2015-09-13T13:40:00.000Z"`) {
			t.Errorf("the server's refusal is not a not_due answer with serverTime: %s", body)
		}
		return []byte(`{"error": "refused: that slot lies ahead (clock at 1999-01-01T00:00:00.000Z)", "code": "not_due", "serverTime": "2015-09-13T13:40:00.000Z"}`)
	}
	checkNotDueBackfill(t, s)
}

// checkNotDueBackfill runs the backfill of TestRerunRangeIntoTheFuture
// against s: 4 slots rerun, then one request for the first slot not due
// and one row for it and the 716 after it.
func checkNotDueBackfill(t *testing.T, s *rerunServer) {
	t.Helper()
	code, out, errs := runRerun(t, s, "--id", "hourly", "--from", "2015-09-13T10:00Z", "--to", "2015-10-13T10:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if n := s.count("POST /rerun"); n != 5 {
		t.Errorf("POST /rerun received %d times, want 5 (4 due slots, then the first not due)", n)
	}
	want := `TIME                      STATUS        ACTION
2015-09-13T10:00:00.000Z  WAITING       rerun
2015-09-13T11:00:00.000Z  WAITING       rerun
2015-09-13T12:00:00.000Z  WAITING       rerun
2015-09-13T13:00:00.000Z  WAITING       rerun
2015-09-13T14:00:00.000Z  WAITING       skipped 717 slots through 2015-10-13T10:00:00.000Z: not due yet (the server's time is 2015-09-13T13:40:00.000Z)
hourly 2015-09-13T10:00:00.000Z..2015-10-13T10:00:00.000Z: 4 rerun, 717 skipped
`
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("output (-want +got):\n%s", d)
	}
}

// TestRerunRangeServerGoneMidway: the server becomes unreachable at the
// third POST /rerun of four. The backfill stops there (no request for the
// fourth), lists what was rerun, the slot that failed and the one not
// tried, and exits 1 saying where it stopped.
func TestRerunRangeServerGoneMidway(t *testing.T) {
	w := fixture.Hourly("hourly")
	w.StartTime = time.Date(2015, 9, 13, 10, 0, 0, 0, time.UTC)
	s := newRerunServer(t, rerunNow, w)
	s.breakAfter = 3

	code, out, errs := runRerun(t, s, "--id", "hourly", "--from", "2015-09-13T10:00Z", "--to", "2015-09-13T13:00Z")
	if code != ExitFailure {
		t.Errorf("exit %d, want %d", code, ExitFailure)
	}
	if n := s.count("POST /rerun"); n != 3 {
		t.Errorf("POST /rerun received %d times, want 3 (none after the server went away)", n)
	}
	out = strings.ReplaceAll(out, s.url, "URL")
	want := `TIME                      STATUS        ACTION
2015-09-13T10:00:00.000Z  WAITING       rerun
2015-09-13T11:00:00.000Z  WAITING       rerun
2015-09-13T12:00:00.000Z  WAITING       failed (POST /rerun: cannot reach the celos server at URL (--server, CELOS_SERVER): EOF)
2015-09-13T13:00:00.000Z  WAITING       not tried: the backfill stopped at 2015-09-13T12:00:00.000Z
hourly 2015-09-13T10:00:00.000Z..2015-09-13T13:00:00.000Z: 2 rerun, 1 failed, 1 not tried
`
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("output (-want +got):\n%s", d)
	}
	wantErr := "celos: backfill of hourly stopped at 2015-09-13T12:00:00.000Z: POST /rerun: cannot reach the celos server at URL (--server, CELOS_SERVER): EOF (2 rerun, 1 failed, 1 not tried)\n"
	if d := cmp.Diff(wantErr, strings.ReplaceAll(errs, s.url, "URL")); d != "" {
		t.Errorf("stderr (-want +got):\n%s", d)
	}
}

// TestRerunRangeBounds: a range of more than 100,000 slots, or longer than
// 100,000 hours from the workflow's startTime, is refused (exit 2) before
// any slot is rerun, and the listing stops at the bound.
func TestRerunRangeBounds(t *testing.T) {
	m := fixture.Minutely("minutely")
	m.StartTime = time.Date(2015, 6, 1, 0, 0, 0, 0, time.UTC)
	h := fixture.Hourly("hourly")
	h.StartTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newRerunServer(t, rerunNow, m, h)

	// 92 days of minutes: 132,481 slots; 9 lists of 10,080 are under the bound, the 10th over.
	code, out, errs := runRerun(t, s, "--id", "minutely", "--from", "2015-06-01T00:00Z", "--to", "2015-09-01T00:00Z")
	if code != ExitUsage {
		t.Errorf("exit %d, want %d: %s", code, ExitUsage, out)
	}
	wantErr := "celos: --from 2015-06-01T00:00:00.000Z --to 2015-09-01T00:00:00.000Z: minutely has more than 100000 slots in the range " +
		"(100800 up to 2015-08-10T00:00:00.000Z); a backfill is at most 100000 slots: split the range\n"
	if d := cmp.Diff(wantErr, errs); d != "" {
		t.Errorf("stderr (-want +got):\n%s", d)
	}
	if n := s.count("GET /workflow-slots"); n != 10 {
		t.Errorf("GET /workflow-slots received %d times, want 10 (up to the bound)", n)
	}

	// 2000 to 2015: over 131,000 hours; refused before listing.
	code, _, errs = runRerun(t, s, "--id", "hourly", "--from", "1999-01-01T00:00Z", "--to", "2015-01-01T00:00Z", "--dry-run")
	if code != ExitUsage {
		t.Errorf("exit %d, want %d", code, ExitUsage)
	}
	wantErr = "celos: --from 1999-01-01T00:00:00.000Z --to 2015-01-01T00:00:00.000Z: hourly spans 131496 hours from 2000-01-01T00:00:00.000Z; " +
		"a backfill is at most 100000 hours (about 11 years): split the range\n"
	if d := cmp.Diff(wantErr, errs); d != "" {
		t.Errorf("stderr (-want +got):\n%s", d)
	}
	if n := s.count("GET /workflow-slots"); n != 10 {
		t.Errorf("GET /workflow-slots received %d times in all, want 10 (none for the long range)", n)
	}
	if n := s.count("POST /rerun") + s.count("GET /rerun"); n != 0 {
		t.Errorf("/rerun received %d requests, want none", n)
	}
}

// TestRerunRangeBadInput: an unknown workflow (exit 1, named), --to
// before --from (exit 2, nothing asked) and a range with no slot (exit 0,
// said so).
func TestRerunRangeBadInput(t *testing.T) {
	w := fixture.Hourly("hourly")
	w.StartTime = time.Date(2015, 9, 13, 10, 0, 0, 0, time.UTC)
	s := newRerunServer(t, rerunNow, w)

	code, out, errs := runRerun(t, s, "--id", "nope", "--from", "2015-09-13T10:00Z", "--to", "2015-09-13T13:00Z")
	if code != ExitFailure || out != "" || !strings.HasPrefix(errs, "celos: backfill of nope: GET /workflow: 404 Not Found: ") || !strings.Contains(errs, "nope") {
		t.Errorf("unknown workflow: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	before := s.count("GET /workflow")
	code, out, errs = runRerun(t, s, "--id", "hourly", "--from", "2015-09-13T13:00Z", "--to", "2015-09-13T10:00Z")
	if code != ExitUsage || out != "" || errs != "celos: --to 2015-09-13T10:00:00.000Z is before --from 2015-09-13T13:00:00.000Z\n" {
		t.Errorf("--to before --from: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if s.count("GET /workflow") != before {
		t.Errorf("--to before --from asked the server")
	}
	code, out, errs = runRerun(t, s, "--id", "hourly", "--from", "2015-09-13T10:10Z", "--to", "2015-09-13T10:50Z")
	want := "hourly 2015-09-13T10:10:00.000Z..2015-09-13T10:50:00.000Z: no slots in the range\n"
	if code != 0 || errs != "" {
		t.Errorf("no slots: exit %d, stderr %q", code, errs)
	}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("no slots: output (-want +got):\n%s", d)
	}
	if n := s.count("POST /rerun"); n != 0 {
		t.Errorf("POST /rerun received %d times, want none", n)
	}
}

// TestClientForeignErrorPage: an error answer that is not celos's JSON (a
// proxy's or another server's HTML page, megabytes of it, with escape
// sequences) is shown clipped and with its control characters escaped,
// not poured onto the terminal; celos's own JSON message is shown as it
// is.
func TestClientForeignErrorPage(t *testing.T) {
	page := "<html>\x1b[31mBad Gateway\n" + strings.Repeat("A", 5<<20) + "</html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/workflow-slots" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error": "workflow not found: nope", "code": "not_found"}`))
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte(page))
	}))
	defer srv.Close()
	var out, errs strings.Builder
	code := run([]string{"workflows", "--server", srv.URL}, &out, &errs)
	want := "celos: GET /workflow-list: 502 Bad Gateway: not a celos answer (" + fmt.Sprint(len(page)) + ` bytes): "<html>\x1b[31mBad Gateway\nAAAA` + strings.Repeat("A", 200-len("<html>\x1b[31mBad Gateway\nAAAA")) + `..."` + "\n"
	if code != ExitFailure || out.String() != "" || errs.String() != want {
		t.Errorf("exit %d, stdout %q, stderr (%d bytes) %q\nwant %q", code, out.String(), errs.Len(), clipForTest(errs.String()), want)
	}
	errs.Reset()
	code = run([]string{"slots", "--id", "nope", "--server", srv.URL}, &out, &errs)
	if want := "celos: GET /workflow-slots: 404 Not Found: workflow not found: nope\n"; code != ExitFailure || errs.String() != want {
		t.Errorf("celos's own error: exit %d, stderr %q, want %q", code, errs.String(), want)
	}
}

func clipForTest(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}
