package api

import (
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
