package schema

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"schedule", "trigger", "externalService", "maxRetryCount", "waitTimeoutSeconds", "startTime", "schedulingStrategy"}
	for _, tc := range []struct{ in, want string }{
		{"schedul", "schedule"},
		{"Schedule", "schedule"},
		{"maxRetries", "maxRetryCount"},
		{"maxRetry", "maxRetryCount"},
		{"triger", "trigger"},
		{"waitTimeout", "waitTimeoutSeconds"},
		{"start", "startTime"},
		{"sta", ""}, // too short to guess
		{"zzz", ""},
		{"externalservice", "externalService"},
		{"schedulingStrategie", "schedulingStrategy"},
	} {
		if got := closest(tc.in, names); got != tc.want {
			t.Errorf("closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
