package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// FuzzRequest sends the handler arbitrary methods, paths and query strings
// (the HTTP parameter parsing: repeated parameters, bad escapes, malformed
// and extreme times, ids with '/', '..', NUL or thousands of bytes) over the
// in-memory service. The handler must never panic or answer 500 (the
// service does not fail), every answer must be JSON (an error body or the
// endpoint's documented shape), and every error must be a client error.
func FuzzRequest(f *testing.F) {
	for _, s := range []struct{ method, path, query string }{
		{"GET", "/workflow-slots", "id=a&start=2015-09-13T00:00Z&end=2015-09-13T13:40Z"},
		{"GET", "/workflow-slots", "id=a&id=b"},
		{"GET", "/workflow-slots", "id=../../etc&start=2015-09-13T00:00:00.000Z"},
		{"GET", "/slot-state", "id=a&time=2015-09-13T13:00:00.000%2B02:00"},
		{"GET", "/slot-state", "id=a%00b&time=0000-01-01T00:00Z"},
		{"GET", "/slot-state", "id=a&time=9999-12-31T23:59:59.999999999Z"},
		{"GET", "/trigger-status", "id=a&time=2015-09-13T13:00Z&time=2015-09-13T14:00Z"},
		{"POST", "/rerun", "id=a&time=2015-09-13T13:00Z"},
		{"POST", "/kill", "id=a&time=2015-13-45T25:61Z"},
		{"POST", "/pause", "id=a&paused=TRUE"},
		{"POST", "/scheduler", "time=2015-09-13T13:40Z&ids=a,,b,%2F,.."},
		{"GET", "/register", "bucket=b&key=..%2Fx"},
		{"PUT", "/register", "bucket=b&key=k"},
		{"DELETE", "/register", "bucket=b&prefix=k&key=k"},
		{"GET", "/list-register-keys", "bucket=b&prefix=%2E"},
		{"GET", "/workflow", "id=" + strings.Repeat("a", 300)},
		{"GET", "/workflow", "id=a;b&%zz"},
		{"PATCH", "/workflow", ""},
		{"GET", "/nope/../workflow-list", ""},
	} {
		f.Add(s.method, s.path, s.query)
	}
	// One handler for the run: requests that change the fake (steps,
	// pauses, registers) make later ones meet other states.
	h := New(newFake("a", "b"), Options{Now: func() time.Time { return t0 }})
	f.Fuzz(func(t *testing.T, method, path, query string) {
		if !validMethod(method) {
			return
		}
		req := &http.Request{
			Method:     method,
			URL:        &url.URL{Path: path, RawQuery: query},
			Header:     http.Header{},
			Body:       http.NoBody,
			Proto:      "HTTP/1.1",
			ProtoMajor: 1, ProtoMinor: 1,
			RemoteAddr: "127.0.0.1:1",
		}
		req = req.WithContext(t.Context())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s?%s: %d %s", method, path, query, rec.Code, rec.Body)
		}
		ct := rec.Header().Get("Content-Type")
		if rec.Code >= 400 || strings.HasPrefix(ct, "application/json") {
			if !json.Valid(rec.Body.Bytes()) && method != http.MethodHead {
				t.Fatalf("%s %s?%s: %d answer is not JSON: %q", method, path, query, rec.Code, rec.Body)
			}
		}
		if rec.Code >= 400 {
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%s %s?%s: %d without an error body: %q", method, path, query, rec.Code, rec.Body)
			}
		}
	})
}

// validMethod is what net/http lets through as a method (a token).
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}

// FuzzParseTime checks the API's time parser: it never panics, and what
// it accepts formats back to a time it parses to the same instant (at
// millisecond precision, the resolution of slot times).
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"2015-09-13T13:40Z", "2015-09-13T13:40:00Z", "2015-09-13T13:40:00.000Z", "2015-09-13T13:40:00.123456789+05:30",
		"0000-01-01T00:00Z", "9999-12-31T23:59:59.999Z", "2015-02-29T00:00Z", "2015-09-13T24:00Z", "2015-09-13", "",
		"2015-09-13T13:40:00-24:00", "2015-09-13T13:40:00+99:99", "+2015-09-13T13:40Z",
		"0000-01-01T00:00+01:00", "9999-12-31T23:59-01:00", // out of range in UTC (found by hand, kept)
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := slot.ParseTime(s)
		if err != nil {
			return
		}
		back, err := slot.ParseTime(slot.FormatTime(tm))
		if err != nil {
			t.Fatalf("%q parsed to %v, whose form %q does not parse: %v", s, tm, slot.FormatTime(tm), err)
		}
		if !back.Equal(tm.Truncate(time.Millisecond)) {
			t.Fatalf("%q: %v formats and parses back to %v", s, tm, back)
		}
	})
}
