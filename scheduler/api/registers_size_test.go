package api_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/api"
)

// TestLargeRegisterReadsBack: a register the API accepts (a body up to
// api.MaxBodyBytes) reads back from the file store byte for byte. Before,
// the store wrote a value of 64 KiB or more and then refused to read it
// ("larger than 65536 bytes": a 500 for every later GET).
func TestLargeRegisterReadsBack(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 12, 0, 0, 0, time.UTC))
	for _, n := range []int{64<<10 + 1, 500 << 10, api.MaxBodyBytes} {
		body := `"` + strings.Repeat("x", n-2) + `"`
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, httptest.NewRequest("PUT", "/register?bucket=big&key=k", strings.NewReader(body)))
		if rec.Code != 200 {
			t.Fatalf("PUT of %d bytes: %d %s", n, rec.Code, rec.Body)
		}
		if got := s.do(200, "GET", "/register?bucket=big&key=k", nil); strings.TrimSpace(got) != body {
			t.Errorf("GET after a PUT of %d bytes: %d bytes back", n, len(got))
		}
	}
}
