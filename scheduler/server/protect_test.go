package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// codes are the codes of the refusals protect makes, by status.
var codes = map[int]string{401: "unauthorized", 403: "cross_site", 421: "misdirected"}

func TestProtect(t *testing.T) {
	changed := 0
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			changed++
		}
		w.WriteHeader(http.StatusOK)
	})
	tests := []struct {
		name    string
		token   string
		method  string
		headers map[string]string
		want    int
		changes bool
	}{
		// want's code (the JSON error's "code") is codes[want].
		{"read from another site is fine", "", "GET", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 200, false},
		{"post from curl (no browser headers)", "", "POST", nil, 200, true},
		{"post from celos's own page", "", "POST", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8080"}, 200, true},
		{"post from another site", "", "POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403, false},
		{"post from another origin, older browser", "", "POST", map[string]string{"Origin": "https://evil.example"}, 403, false},
		{"read through another name, no token (DNS rebinding)", "", "GET", map[string]string{"Host": "rebind.attacker.example:8080"}, 421, false},
		{"post through another name, no token (DNS rebinding)", "", "POST", map[string]string{"Host": "rebind.attacker.example:8080", "Sec-Fetch-Site": "same-origin", "Origin": "http://rebind.attacker.example:8080"}, 421, false},
		{"post through another name with the token", "s3cret", "POST", map[string]string{"Host": "celos.example.com", "Authorization": "Bearer s3cret"}, 200, true},
		{"token required, none sent", "s3cret", "POST", nil, 401, false},
		{"token required and sent", "s3cret", "POST", map[string]string{"Authorization": "Bearer s3cret"}, 200, true},
		{"token sent but cross-site", "s3cret", "POST", map[string]string{"Authorization": "Bearer s3cret", "Sec-Fetch-Site": "cross-site"}, 403, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed = 0
			h := protect(inner, tt.token, hostPolicy("127.0.0.1", tt.token), slog.New(slog.DiscardHandler))
			req := httptest.NewRequest(tt.method, "http://127.0.0.1:8080/rerun?id=a&time=2015-09-13T13:00Z", nil)
			for k, v := range tt.headers {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want || (changed > 0) != tt.changes {
				t.Fatalf("%s %s: status %d (want %d), reached handler %v (want %v): %s", tt.method, tt.name, rec.Code, tt.want, changed > 0, tt.changes, rec.Body)
			}
			if tt.want == http.StatusOK {
				return
			}
			// A refusal is a JSON error with its code (api's table).
			var e struct{ Error, Code string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Code != codes[tt.want] ||
				rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("%s %s: %d %q %s, want a JSON error with code %q", tt.method, tt.name, rec.Code,
					rec.Header().Get("Content-Type"), rec.Body, codes[tt.want])
			}
		})
	}
}
