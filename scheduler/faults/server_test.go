package faults

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/servertest"
)

// celosBinary builds cmd/celos once per test run and returns its path.
var celosBinary = sync.OnceValues(func() (string, error) { return servertest.BuildCelos("celos-faults-bin-") })

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := celosBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// server is a `celos server` process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	URL    string
	stderr *servertest.LockedBuffer
	done   chan struct{}
	err    error
}

// startServer runs `celos server` on 127.0.0.1 with a free port and the
// given extra flags, and waits until it answers /healthz. The process is
// killed when the test ends, if it still runs.
func startServer(t *testing.T, dir string, flags ...string) *server {
	t.Helper()
	s := launch(t, dir, flags...)
	urlFile := filepath.Join(dir, "url")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(urlFile); err == nil && len(b) > 0 {
			u := strings.TrimSpace(string(b))
			if resp, err := http.Get(u + "/healthz"); err == nil {
				resp.Body.Close()
				s.URL = u
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("celos server exited: %v\n%s", s.err, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("celos server did not start in 30s\n%s", s.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// launch starts `celos server` without waiting for it.
func launch(t *testing.T, dir string, flags ...string) *server {
	t.Helper()
	bin, err := celosBinary()
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "url"))
	args := append([]string{"server", "--port", "0", "--workflows", filepath.Join(dir, "wf"), "--db", filepath.Join(dir, "db"),
		"--jobs", filepath.Join(dir, "jobs"), "--logs", "", "--url-file", filepath.Join(dir, "url")}, flags...)
	s := &server{t: t, cmd: exec.Command(bin, args...), stderr: &servertest.LockedBuffer{}, done: make(chan struct{})}
	s.cmd.Stderr = s.stderr
	s.cmd.Stdout = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// kill9 kills the server with SIGKILL and waits until it is gone.
func (s *server) kill9() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop stops the server with SIGTERM and waits for it.
func (s *server) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("celos server did not stop in 60s\n%s", s.stderr)
	}
}

// wait waits for the process to exit by itself.
func (s *server) wait(d time.Duration) error {
	s.t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(d):
		s.t.Fatalf("celos server still runs after %v\n%s", d, s.stderr)
		return nil
	}
}

// post sends POST path?q and returns the status and body.
func (s *server) post(path string, q url.Values) (int, string) {
	s.t.Helper()
	resp, err := http.Post(s.URL+path+"?"+q.Encode(), "", nil)
	if err != nil {
		s.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// slots returns the status of every stored slot of wf in [start, end).
func (s *server) slots(wf string, start, end time.Time) map[string]slotJSON {
	s.t.Helper()
	q := url.Values{"id": {wf}, "start": {start.Format(time.RFC3339)}, "end": {end.Format(time.RFC3339)}}
	resp, err := http.Get(s.URL + "/workflow-slots?" + q.Encode())
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Slots []slotJSON }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		s.t.Fatalf("workflow-slots %s: %d %v", wf, resp.StatusCode, err)
	}
	m := make(map[string]slotJSON, len(out.Slots))
	for _, sl := range out.Slots {
		m[sl.Time] = sl
	}
	return m
}

type slotJSON struct {
	Time       string  `json:"time"`
	Status     string  `json:"status"`
	ExternalID *string `json:"externalID"`
	RetryCount int     `json:"retryCount"`
}
