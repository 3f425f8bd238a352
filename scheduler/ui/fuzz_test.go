package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzRequest sends the UI arbitrary paths and query strings (ids with
// '/', '..', NUL, long strings; malformed, repeated and extreme times and
// ranges; static paths that try to climb out): it never panics and never
// answers 5xx (the service does not fail), and never serves a file that is
// not one of its embedded assets.
func FuzzRequest(f *testing.F) {
	for _, s := range []struct{ path, query string }{
		{"/ui", ""},
		{"/ui", "group=etl&end=2015-09-13T13:40Z&hours=48"},
		{"/ui", "end=0000-01-01T00:00%2B01:00&hours=-1"},
		{"/ui", "end=9999-12-31T23:59Z&hours=100000000"},
		{"/ui", "zoom=-9223372036854775808&page=9999999999999&q=%00&problems=1"},
		{"/ui", "zoom=7&time=1970-01-01&cols=168&page=2"},
		{"/ui/slot", "id=wordcount&time=2015-09-13T13:00Z"},
		{"/ui/log", "id=wordcount&time=2015-09-13T13:00Z&ext=..%2F..%2Fetc%2Fpasswd"},
		{"/ui/slot", "id=..%2F..%2Fetc&time=2015-09-13T13:00Z&time=x"},
		{"/ui/workflow", "id=%00"},
		{"/ui/log", "id=wordcount&time=2015-09-13T13:00Z&max=-1"},
		{"/ui/static/ui.js", "v=1"},
		{"/ui/static/../../go.mod", ""},
		{"/ui/" + strings.Repeat("a/", 200), ""},
	} {
		f.Add(s.path, s.query)
	}
	h := newTestHandler(f, demoService(), Options{})
	f.Fuzz(func(t *testing.T, path, query string) {
		req := &http.Request{Method: "GET", URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{},
			Body: http.NoBody, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, RemoteAddr: "127.0.0.1:1"}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(t.Context()))
		if rec.Code >= 500 {
			t.Fatalf("GET %s?%s: %d %.300s", path, query, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "module github.com/celos-go/celos") {
			t.Fatalf("GET %s?%s served go.mod", path, query)
		}
	})
}
