package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const goodProject = `{
  "format": "celos.dev/workflows/v1",
  "project": "good",
  "workflows": [
    {
      "id": "good",
      "schedule": {"type": "cron", "cron": "0 0 * * * ?", "timeZone": "UTC"},
      "trigger": {"type": "always"},
      "schedulingStrategy": {"type": "serial", "concurrency": 1},
      "externalService": {"type": "command", "command": ["true"]},
      "startTime": "2015-09-13T00:00:00Z",
      "maxRetryCount": 0,
      "waitTimeoutSeconds": 2147483647
    }
  ]
}
`

// hostileWorkflowFiles are workflows files an attacker (or a mistake)
// could put in the workflows directory; each must be a load error that
// leaves the good project running.
func hostileWorkflowFiles() map[string]string {
	one := func(project, id, trigger string) string {
		return `{"format":"celos.dev/workflows/v1","project":` + project + `,"workflows":[{"id":` + id +
			`,"schedule":{"type":"cron","cron":"0 0 * * * ?","timeZone":"UTC"},"trigger":` + trigger +
			`,"schedulingStrategy":{"type":"serial","concurrency":1},"externalService":{"type":"command","command":["true"]},` +
			`"startTime":"2015-09-13T00:00:00Z","maxRetryCount":0,"waitTimeoutSeconds":1}]}`
	}
	always := `{"type":"always"}`
	deep := strings.Repeat(`{"type":"not","trigger":`, 5000) + always + strings.Repeat("}", 5000)
	return map[string]string{
		"traversal-project.json": one(`"../../evil"`, `"x"`, always),
		"traversal-id.json":      one(`"p1"`, `"../../../tmp/evil"`, always),
		"slash-id.json":          one(`"p2"`, `"a/b"`, always),
		"nul-id.json":            one(`"p3"`, `"a\u0000b"`, always),
		"dot-id.json":            one(`"p4"`, `".."`, always),
		"long-id.json":           one(`"p5"`, `"`+strings.Repeat("x", 300)+`"`, always),
		"deep-trigger.json":      one(`"p6"`, `"deep"`, deep),
		"deep-arrays.json":       `{"format":"celos.dev/workflows/v1","project":"p7","workflows":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`,
		"bad-cron.json":          strings.Replace(one(`"p8"`, `"c"`, always), `0 0 * * * ?`, `0 0 0 31 2 ? 1970-2099/0`, 1),
		"trailing.json":          one(`"p9"`, `"t"`, always) + `]`,
	}
}

// goodInstall makes the directory of a startServer installation and its
// workflows directory (dir/wf, returned too), holding the good project as
// good.json.
func goodInstall(t *testing.T) (dir, wf string) {
	t.Helper()
	dir = t.TempDir()
	wf = filepath.Join(dir, "wf")
	if err := os.MkdirAll(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wf, "good.json"), []byte(goodProject), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, wf
}

// TestHostileInput runs a real celos server over a workflows directory
// holding hostile files beside a good one, and sends it hostile requests
// (raw, so that no client cleans them): ids and names with '/', '..', NUL,
// thousands of bytes; repeated parameters; malformed times; a huge query
// string and body. Every answer is a client error or success, never a
// 5xx; the good workflow keeps running; no file is created outside the
// state, jobs and log directories, and a file planted outside is not
// touched.
func TestHostileInput(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a celos server process")
	}
	dir, wf := goodInstall(t)
	hostile := hostileWorkflowFiles()
	for name, content := range hostile {
		os.WriteFile(filepath.Join(wf, name), []byte(content), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(wf, "passwd.json"))
	secret := filepath.Join(dir, "outside", "secret")
	os.MkdirAll(filepath.Dir(secret), 0o755)
	os.WriteFile(secret, []byte("untouched"), 0o644)
	s := startServer(t, dir)
	before := listFiles(t, dir)

	long := strings.Repeat("a", 4096)
	requests := []struct {
		method, target, body string
		want                 int // 0: any 2xx or 4xx
	}{
		{"POST", "/scheduler?time=2015-09-13T02:30Z", "", 200},
		{"GET", "/workflow-slots?id=..%2F..%2Fetc", "", 400},
		{"GET", "/workflow-slots?id=good&id=good", "", 400},
		{"GET", "/workflow-slots?id=good&start=2015-13-45T25:61Z", "", 400},
		{"GET", "/slot-state?id=good&time=0000-01-01T00:00%2B01:00", "", 400},
		{"GET", "/slot-state?id=good&time=9999-12-31T23:59-01:00", "", 400},
		{"GET", "/slot-state?id=" + long, "", 400},
		{"POST", "/rerun?id=..%2Fx&time=2015-09-13T00:00Z", "", 400},
		{"POST", "/rerun?id=good&time=2015-09-13T00:00:00.0001Z", "", 0},
		{"POST", "/kill?id=good%00x&time=2015-09-13T00:00Z", "", 400},
		{"POST", "/pause?id=%2E%2E&paused=true", "", 400},
		{"POST", "/pause?id=good&paused=true&paused=false", "", 400},
		{"POST", "/pause?id=good&paused=yes", "", 400},
		{"POST", "/scheduler?ids=..,%2Fetc,good", "", 400},
		{"PUT", "/register?bucket=..&key=x", "1", 0},
		{"PUT", "/register?bucket=b&key=..%2F..%2F..%2Fescape", "1", 0},
		{"PUT", "/register?bucket=b&key=%00", "1", 0},
		{"PUT", "/register?bucket=b&key=" + long, "1", 0},
		{"PUT", "/register?bucket=b&key=k", "{not json", 400},
		{"PUT", "/register?bucket=b&key=k", strings.Repeat("[", 2<<20), 413},
		{"DELETE", "/register?bucket=b&prefix=..", "", 0},
		{"DELETE", "/register?bucket=..%2F..&key=x", "", 0},
		{"GET", "/list-register-keys?bucket=..%2F..", "", 0},
		{"GET", "/register?bucket=b&key=..%2F..%2Fouside%2Fsecret", "", 0},
		{"GET", "/ui/slot?id=..%2F..%2Foutside&time=2015-09-13T00:00Z", "", 0},
		{"GET", "/ui/log?id=good&time=2015-09-13T00:00Z", "", 0},
		{"GET", "/ui/workflow?id=%00", "", 0},
		{"GET", "/ui/static/..%2F..%2F..%2Fgo.mod", "", 0},
		{"GET", "/ui/static/../../outside/secret", "", 0},
		{"GET", "/ui?" + strings.Repeat("q=1&", 10000), "", 0},
		{"GET", "/workflow-list?" + strings.Repeat("x", 100<<10), "", 431},
	}
	for _, r := range requests {
		code, body := rawRequest(t, s.URL, r.method, r.target, r.body)
		short := r.target
		if len(short) > 80 {
			short = short[:80] + "..."
		}
		switch {
		case code >= 500 || code == 0:
			t.Errorf("%s %s: %d %.200s", r.method, short, code, body)
		case r.want != 0 && code != r.want:
			t.Errorf("%s %s: %d, want %d: %.200s", r.method, short, code, r.want, body)
		case strings.Contains(body, "untouched"):
			t.Errorf("%s %s: answered the content of a file outside", r.method, short)
		}
	}

	// The good workflow runs; every hostile file is a load error.
	code, body := rawRequest(t, s.URL, "GET", "/workflow-list", "")
	if code != 200 || !strings.Contains(body, `"good"`) {
		t.Fatalf("workflow-list: %d %s", code, body)
	}
	for name := range hostile {
		if !strings.Contains(body, name) {
			t.Errorf("%s is not reported as a load error", name)
		}
	}
	if !strings.Contains(body, "passwd.json") {
		t.Error("a symlink to /etc/passwd is not reported as a load error")
	}
	if strings.Contains(body, "root:") {
		t.Error("/workflow-list shows the content of /etc/passwd")
	}

	// No file outside the server's own directories; the planted file is intact.
	for p := range listFiles(t, dir) {
		if before[p] {
			continue
		}
		if !strings.HasPrefix(p, "db/") && !strings.HasPrefix(p, "jobs/") {
			t.Errorf("a file appeared outside the state and jobs directories: %s", p)
		}
		if strings.HasPrefix(p, "db/register/") && !strings.HasPrefix(p, "db/register/b/") {
			t.Errorf("a register outside its bucket: %s", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "untouched" {
		t.Errorf("the file outside was changed: %q", b)
	}
	s.stop()
}

// listFiles lists the files under dir, relative, with '/'.
func listFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = true
		return nil
	})
	return out
}

// rawRequest sends one HTTP/1.1 request as written, without a client's
// normalization, and returns the status and body (status 0 if the server
// gave no answer).
func rawRequest(t *testing.T, base, method, target, body string) (int, string) {
	t.Helper()
	host := strings.TrimPrefix(base, "http://")
	c, err := net.DialTimeout("tcp", host, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, target, host, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSlowClients: connections that send half a request header are closed
// by the server (ReadHeaderTimeout), and while 200 of them hang, other
// clients are served.
func TestSlowClients(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the server's header timeout (10 s)")
	}
	dir, _ := goodInstall(t)
	s := startServer(t, dir)
	host := strings.TrimPrefix(s.URL, "http://")
	var conns []net.Conn
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /workflow-list HTTP/1.1\r\nHost: %s\r\nX-Slow: ", host)
		conns = append(conns, c)
	}
	// Served despite them (rawRequest allows a generous 30 s; how fast
	// is not asserted: timings on a shared machine are not a test).
	start := time.Now()
	if code, _ := rawRequest(t, s.URL, "GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz while 200 clients hang: %d", code)
	}
	// The hanging connections are closed by the server within its header timeout.
	for i, c := range conns {
		c.SetReadDeadline(start.Add(60 * time.Second)) // the header timeout is 10 s; generous
		_, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection %d still open %v after it stalled", i, time.Since(start))
		}
	}
	t.Logf("200 stalled connections closed by the server after %v", time.Since(start).Round(100*time.Millisecond))
	s.stop()
}

// TestHostileFilesInWorkflowsDir runs a real celos server over a
// workflows directory holding, beside a good project, a FIFO, symbolic
// links to /dev/zero, to a FIFO and to a secret file, and documents that
// carry the secret where encoding/json would quote it. The server starts,
// steps finish, the good workflow runs to SUCCESS, every hostile file is a
// load error naming what it is, and neither /workflow-list, /ui nor the
// server's log ever shows the secret. A FIFO as --defaults makes the
// server exit with an error at once instead of hanging.
func TestHostileFilesInWorkflowsDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a celos server process")
	}
	const secret = "s3cr3tXq"
	dir, wf := goodInstall(t)
	shadow := filepath.Join(dir, "outside", "shadow")
	os.MkdirAll(filepath.Dir(shadow), 0o755)
	os.WriteFile(shadow, []byte("root:$6$"+secret+"$abcdefgh:19000:0:99999:7:::\n"), 0o600)
	outsideFifo := filepath.Join(dir, "outside", "fifo")
	for _, p := range []string{filepath.Join(wf, "fifo.json"), outsideFifo} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"zero.json": "/dev/zero", "tofifo.json": outsideFifo, "shadow.json": shadow} {
		if err := os.Symlink(target, filepath.Join(wf, name)); err != nil {
			t.Fatal(err)
		}
	}
	withValue := func(field, value string) string {
		return strings.Replace(goodProject, `"maxRetryCount": 0`, `"maxRetryCount": 0, "`+field+`": `+value, 1)
	}
	os.WriteFile(filepath.Join(wf, "format.json"), []byte(`{"format":"`+secret+`"}`), 0o644)
	os.WriteFile(filepath.Join(wf, "time.json"), []byte(strings.Replace(goodProject, `"2015-09-13T00:00:00Z"`, `"`+secret+`"`, 1)), 0o644)
	os.WriteFile(filepath.Join(wf, "number.json"), []byte(withValue("url", "31415926")), 0o644)
	want := map[string]string{
		"fifo.json":   "not a regular file (named pipe)",
		"zero.json":   "not a regular file (symbolic link to a character device)",
		"tofifo.json": "not a regular file (symbolic link to a named pipe)",
		"shadow.json": "must be a JSON object",
		"format.json": "unsupported format version",
		"time.json":   "startTime",
		"number.json": "url must be a string",
	}

	s := startServer(t, dir)
	step := func() {
		t.Helper()
		done := make(chan struct{})
		var code int
		var body string
		go func() {
			defer close(done)
			code, body = rawRequest(t, s.URL, "POST", "/scheduler?time=2015-09-13T00:30Z", "")
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("a step did not finish in 2 minutes\n%s", s.stderr)
		}
		if code != 200 {
			t.Fatalf("POST /scheduler: %d %s", code, body)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		step()
		if sl := s.slots("good", time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC), time.Date(2015, 9, 13, 1, 0, 0, 0, time.UTC)); sl["2015-09-13T00:00:00.000Z"].Status == "SUCCESS" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the good workflow did not run to SUCCESS in 2 minutes\n%s", s.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	code, body := rawRequest(t, s.URL, "GET", "/workflow-list", "")
	if code != 200 || !strings.Contains(body, `"good"`) {
		t.Fatalf("workflow-list: %d %s", code, body)
	}
	var list struct {
		IDs        []string `json:"ids"`
		LoadErrors []struct {
			File, Error string
		} `json:"loadErrors"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("workflow-list: %v: %s", err, body)
	}
	got := map[string]string{}
	for _, le := range list.LoadErrors {
		got[le.File] = le.Error
	}
	for name, msg := range want {
		if !strings.Contains(got[name], msg) {
			t.Errorf("%s: load error %q, want it to say %q", name, got[name], msg)
		}
	}
	_, ui := rawRequest(t, s.URL, "GET", "/ui", "")
	if !strings.Contains(ui, "fifo.json") {
		t.Errorf("/ui does not show the load errors:\n%.2000s", ui)
	}
	s.stop()
	for what, text := range map[string]string{"/workflow-list": body, "/ui": ui, "the server's log": s.stderr.String()} {
		for _, leak := range []string{secret, "31415926", "root:"} {
			if strings.Contains(text, leak) {
				t.Errorf("%s shows %q from a file's content", what, leak)
			}
		}
	}

	// A FIFO as the defaults file: the server exits with an error naming
	// it, instead of hanging at start-up.
	d := launch(t, dir, "--defaults", filepath.Join(wf, "fifo.json"))
	if err := d.wait(2 * time.Minute); err == nil || !strings.Contains(d.stderr.String(), "fifo.json: not a regular file (named pipe)") {
		t.Errorf("server with a FIFO as --defaults: %v\n%s", err, d.stderr)
	}
}

// TestWorkflowOwnerSurvivesServerRestart: two projects define the same
// workflow id. A real server keeps the id with the project that had it
// first across restarts, also when the files are renamed so that the
// other sorts first: only the owner's command ever runs on its slots, and
// the other file is a load error naming the id and the owner's file.
func TestWorkflowOwnerSurvivesServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts celos server processes")
	}
	dir := t.TempDir()
	wf := filepath.Join(dir, "wf")
	os.MkdirAll(wf, 0o755)
	runs := filepath.Join(dir, "runs")
	project := func(name string) []byte {
		p := strings.Replace(goodProject, `"project": "good"`, `"project": "`+name+`"`, 1)
		p = strings.Replace(p, `"id": "good"`, `"id": "wordcount-nyc"`, 1)
		return []byte(strings.Replace(p, `"command": ["true"]`, `"command": ["sh", "-c", "echo `+name+` >> `+runs+`"]`, 1))
	}
	write := func(file, name string) {
		if err := os.WriteFile(filepath.Join(wf, file+".tmp"), project(name), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Rename(filepath.Join(wf, file+".tmp"), filepath.Join(wf, file))
	}
	// runSlot steps at now until the slot an hour before is SUCCESS.
	runSlot := func(s *server, slotTime time.Time) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if code, body := s.post("/scheduler", url.Values{"time": {slotTime.Add(30 * time.Minute).Format(time.RFC3339)}}); code != 200 {
				t.Fatalf("POST /scheduler: %d %s", code, body)
			}
			if s.slots("wordcount-nyc", slotTime, slotTime.Add(time.Hour))[slotTime.Format("2006-01-02T15:04:05.000Z")].Status == "SUCCESS" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("slot %s not SUCCESS in 2 minutes\n%s", slotTime, s.stderr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	loadError := func(s *server, file string) string {
		t.Helper()
		_, body := rawRequest(t, s.URL, "GET", "/workflow-list", "")
		var list struct {
			LoadErrors []struct{ File, Error string } `json:"loadErrors"`
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("workflow-list: %v: %s", err, body)
		}
		for _, le := range list.LoadErrors {
			if le.File == file {
				return le.Error
			}
		}
		return ""
	}
	slot0 := time.Date(2015, 9, 13, 0, 0, 0, 0, time.UTC)

	write("mine.json", "mine")
	s := startServer(t, dir)
	runSlot(s, slot0)
	write("athers.json", "theirs") // deployed later, sorts first
	runSlot(s, slot0.Add(time.Hour))
	if le := loadError(s, "athers.json"); !strings.Contains(le, `workflow id "wordcount-nyc" belongs to project mine (mine.json)`) {
		t.Errorf("load error of the later file: %q", le)
	}
	s.stop()

	os.Rename(filepath.Join(wf, "mine.json"), filepath.Join(wf, "zzz-mine.json"))
	for i := range 2 {
		s = startServer(t, dir)
		runSlot(s, slot0.Add(time.Duration(2+i)*time.Hour))
		if le := loadError(s, "athers.json"); !strings.Contains(le, `workflow id "wordcount-nyc" belongs to project mine (zzz-mine.json)`) {
			t.Errorf("restart %d: load error of the other file: %q", i+1, le)
		}
		s.stop()
	}
	data, _ := os.ReadFile(runs)
	if got := strings.Fields(string(data)); strings.Join(got, ",") != "mine,mine,mine,mine" {
		t.Fatalf("commands run on wordcount-nyc's slots: %v, want the owner's four times", got)
	}
	if n := strings.Count(s.stderr.String(), "belongs to project mine"); n != 1 {
		t.Errorf("the last server logged the clash %d times, want once", n)
	}
}
