package cmd

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
