package api_test

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/api"
)

// TestReservedBucketsAreReadOnly: the buckets the scheduler keeps its own
// records in (the SLA misses sent, the webhook outbox, the workflows that
// left while their slots ran, the definitions of the workflows that
// submitted jobs) can be listed
// through the API but not written or deleted: 403, code reserved_bucket,
// naming the bucket, and the record stays. The SLA records can be read;
// the outbox's and the departures' cannot (they name the targets' URLs,
// which may carry tokens, or hold a workflow's definition, its Oozie
// properties included; and a read needs no token). (Before, a user with the API token
// could remove an SLA record, so that the miss was sent again, or forge a
// webhook delivery.) Other buckets are written as before.
func TestReservedBucketsAreReadOnly(t *testing.T) {
	s := newRealServer(t, time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC))
	for _, bucket := range []string{"celos-sla-missed", "celos-outbox", "celos-departed", "celos-defined"} {
		if err := s.db.PutRegister(bucket, "rec", json.RawMessage(`{"mine":true}`)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ method, target, body string }{
			{"PUT", "/register?bucket=" + bucket + "&key=rec", `{"forged":true}`},
			{"PUT", "/register?bucket=" + bucket + "&key=new", `{}`},
			{"DELETE", "/register?bucket=" + bucket + "&key=rec", ""},
			{"DELETE", "/register?bucket=" + bucket + "&prefix=r", ""},
		} {
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, httptest.NewRequest(c.method, c.target, strings.NewReader(c.body)))
			u, _ := url.Parse(c.target)
			api.CheckAnswer(t, c.method, u.Path, rec)
			var got errorAnswer
			json.Unmarshal(rec.Body.Bytes(), &got)
			if rec.Code != 403 || got.Code != "reserved_bucket" || !strings.Contains(got.Error, bucket) {
				t.Errorf("%s %s: %d %s, want 403 reserved_bucket naming the bucket", c.method, c.target, rec.Code, rec.Body)
			}
		}
		if got, err := s.db.GetRegister(bucket, "rec"); err != nil || string(got) != `{"mine":true}` {
			t.Errorf("%s/rec holds %s (%v) after the refused writes", bucket, got, err)
		}
		// The SLA records can be read; the outbox's name the targets' URLs
		// (tokens), the departures' hold definitions: refused.
		if bucket == "celos-sla-missed" {
			if got := s.do(200, "GET", "/register?bucket="+bucket+"&key=rec", nil); strings.TrimSpace(got) != `{"mine":true}` {
				t.Errorf("GET %s/rec: %s", bucket, got)
			}
		} else if got := s.do(403, "GET", "/register?bucket="+bucket+"&key=rec", nil); !strings.Contains(got, "reserved_bucket") || strings.Contains(got, "mine") {
			t.Errorf("GET %s/rec: %s, want 403 reserved_bucket without the value", bucket, got)
		}
		var keys api.RegisterKeys
		s.do(200, "GET", "/list-register-keys?bucket="+bucket, &keys)
		if diff := cmp.Diff([]string{"rec"}, keys.Keys); diff != "" {
			t.Errorf("%s keys (-want +got):\n%s", bucket, diff)
		}
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest("PUT", "/register?bucket=celos-other&key=k", strings.NewReader(`1`)))
	if rec.Code != 200 {
		t.Errorf("PUT to an ordinary bucket: %d %s", rec.Code, rec.Body)
	}
}
