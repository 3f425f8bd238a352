package cmd

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
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
