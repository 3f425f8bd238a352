package notify

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRedirectsAreNotFollowed: a target that answers a redirect (a hook
// that moved, or a receiver an attacker controls that points celos at an
// address inside the network) was followed by Go's client: after 301, 302
// and 303 the event arrived as a GET without its body and was counted
// delivered; after 307 and 308 the signed body and its signature went to
// the other address. A redirect is now an answer that is not a delivery:
// failed (not retried, the same answer would come back), logged with its
// status, and nothing is sent to where it points.
func TestRedirectsAreNotFollowed(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "hook.secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var inside []string // requests that reached the "internal" server
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		inside = append(inside, r.Method+" "+r.URL.Path+" body="+string(b)+" sig="+r.Header.Get("X-Celos-Signature"))
		mu.Unlock()
	}))
	defer internal.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			mu.Lock()
			inside = nil
			mu.Unlock()
			var hits int
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				http.Redirect(w, r, internal.URL+"/admin/reset", code)
			}))
			defer hook.Close()
			var res results
			var logs bytes.Buffer
			var logMu sync.Mutex
			s := New(Options{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil)), OnResult: res.add, Backoff: time.Millisecond})
			s.Send(event(hook.URL+"/hook", secret))
			waitFor(t, "an outcome", func() bool { return res.get("failure delivered")+res.get("failure failed") > 0 })
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := res.get("failure delivered"); n != 0 {
				t.Errorf("a redirect was counted as %d deliveries", n)
			}
			if n := res.get("failure failed"); n != 1 {
				t.Errorf("failed %d times, want 1", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(inside) != 0 {
				t.Errorf("the redirect was followed: %q", inside)
			}
			if hits != 1 {
				t.Errorf("the target was asked %d times, want 1 (a redirect is not retried)", hits)
			}
			logMu.Lock()
			defer logMu.Unlock()
			if want := "redirect"; !strings.Contains(logs.String(), want) || strings.Contains(logs.String(), "/admin/reset") {
				t.Errorf("the log should say the target redirected without quoting where to:\n%s", logs.String())
			}
		})
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
