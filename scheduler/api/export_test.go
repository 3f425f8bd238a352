package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// CheckAnswer validates an answer against openapi.json, for the tests of
// package api_test (which run the handlers on the real engine).
func CheckAnswer(t testing.TB, method, path string, rec *httptest.ResponseRecorder) {
	t.Helper()
	checkResponse(t, loadDoc(t), method, path, rec)
}

// ErrorCodes is every code an error answer may carry (errorKinds and the
// handler's own refusals), sorted, for TestErrorCodes.
func ErrorCodes() []string { return errorCodes() }

// Routes is every path the handler serves and its methods.
func Routes(h *Handler) map[string][]string {
	out := make(map[string][]string, len(h.routes))
	for p, rt := range h.routes {
		for m := range rt.methods {
			out[p] = append(out[p], m)
			if m == http.MethodGet {
				out[p] = append(out[p], http.MethodHead)
			}
		}
	}
	return out
}
