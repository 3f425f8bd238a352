package api

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// TestHealthzNamesInstance: with several instances on one database,
// /healthz shows this instance (Options.Instance), as openapi.json says;
// without, it shows none.
func TestHealthzNamesInstance(t *testing.T) {
	d := loadDoc(t)
	status := map[string]any{
		"id": "celos-2", "host": "vm2", "lease": "15s", "live": []string{"celos-1", "celos-2"},
		"owned": []string{"wordcount"}, "leaseRenewals": 12, "takeOvers": 1, "leasesLost": 0, "fencedWrites": 0,
	}
	h := New(newFake("wordcount"), Options{Instance: func() any { return status }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	checkResponse(t, d, "GET", "/healthz", rec)
	var got struct {
		Instance struct {
			ID    string   `json:"id"`
			Owned []string `json:"owned"`
		} `json:"instance"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Instance.ID != "celos-2" || len(got.Instance.Owned) != 1 {
		t.Fatalf("GET /healthz: %s (%v), want the instance celos-2 owning wordcount", rec.Body, err)
	}
	rec = httptest.NewRecorder()
	New(newFake("wordcount"), Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	var single map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &single); err != nil || single["instance"] != nil {
		t.Fatalf("a single instance's /healthz: %s", rec.Body)
	}
}
