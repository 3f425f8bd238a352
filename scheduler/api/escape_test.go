package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestErrorsNotHTMLEscaped: an error answer says <token>, not
// \u003ctoken\u003e (encoding/json's default HTML escaping), and stays
// valid JSON.
func TestErrorsNotHTMLEscaped(t *testing.T) {
	ts, h, _, _ := authTester(t, newFake("a"))
	rec := send(t, ts, h, "POST", "/scheduler", "")
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	if !strings.Contains(body, "Authorization: Bearer <token>") || strings.Contains(body, `\u003c`) {
		t.Errorf("body %s", body)
	}
	if msg := errMsg(t, rec); !strings.Contains(msg, "Bearer <token>") {
		t.Errorf("decoded error %q", msg)
	}
}

// TestRegisterBodyErrors: a register body that is not JSON says where it
// breaks (not what it holds); valid JSON nested deeper than encoding/json
// reads is called too deep, not "not a JSON value"; a body that is not
// UTF-8 says where.
func TestRegisterBodyErrors(t *testing.T) {
	ts := newTester(t, newFake("a"))
	for _, tc := range []struct{ body, want string }{
		{strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "body is nested too deep: at most 10000 levels of arrays and objects"},
		{strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000), "body is nested too deep: at most 10000 levels of arrays and objects"},
		{`{"a": xsecret}`, "body is not a JSON value: syntax error at byte 7"},
		{``, "body is not a JSON value: syntax error at byte 0"},
		// JSON is UTF-8 (RFC 8259); Go's json.Valid takes any bytes in a
		// string, and a stored register served them back to every client.
		{"{\"a\": \"secret\xff\"}", "body is not UTF-8: invalid byte at 13"},
	} {
		rec := ts.do("PUT", "/register?bucket=b&key=k", tc.body)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for a body of %d bytes", rec.Code, len(tc.body))
		}
		if got := errMsg(t, rec); !strings.HasSuffix(got, tc.want) || strings.Contains(got, "secret") {
			t.Errorf("error %q, want it to end with %q", got, tc.want)
		}
	}
	if rec := ts.do("PUT", "/register?bucket=b&key=k", strings.Repeat("[", 9999)+strings.Repeat("]", 9999)); rec.Code != 200 {
		t.Errorf("9999 levels: %d %s", rec.Code, rec.Body)
	}
}
