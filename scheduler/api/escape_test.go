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
