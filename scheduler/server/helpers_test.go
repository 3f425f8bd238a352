package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/api"
)

// startRun runs the server in the test's process (run with cfg and open;
// openEngine is what Run uses), waits until it has written its URL to
// cfg.URLFile, and returns that URL and a stop function: stop cancels the
// run's context (as SIGTERM does) and returns run's error. stop runs at the
// end of the test too, unless the test called it, and then fails the test
// on an error of run.
func startRun(t *testing.T, cfg Config, open opener) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, open) }()
	stopOnce := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	stopped := false // by the test, which sees run's error
	t.Cleanup(func() {
		if err := stopOnce(); err != nil && !stopped {
			t.Errorf("run: %v", err)
		}
	})
	url = strings.TrimSpace(waitFile(t, cfg.URLFile))
	return url, func() error {
		stopped = true
		return stopOnce()
	}
}

// waitFile waits (10 s at most) until the file at path has content, and
// returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

// stepAndRead asks the server at url for one step at stepAt (POST
// /scheduler?time=stepAt) and returns the status of slot id@slotAt then
// (GET /slot-state; "" when it has none).
func stepAndRead(t *testing.T, url, stepAt, id, slotAt string) string {
	t.Helper()
	resp, err := http.Post(url+"/scheduler?time="+stepAt, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get(url + "/slot-state?id=" + id + "&time=" + slotAt)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s api.Slot
	json.NewDecoder(resp.Body).Decode(&s)
	return string(s.Status)
}
