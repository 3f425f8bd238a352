package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// TestCronExitCodes checks the exit status of `celos cron`, which the
// testscripts can only tell apart as zero or not.
func TestCronExitCodes(t *testing.T) {
	win := []string{"--from", "2024-01-01T00:00Z", "--to", "2024-01-02T00:00Z"}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // prefix
		stderr string // substring
	}{
		{"ok", append([]string{"cron", "0 0 12 * * ?"}, win...), ExitOK, "2024-01-01T12:00:00Z\n", ""},
		{"impossible date", append([]string{"cron", "0 0 0 31 2 ?"}, win...), ExitOK, "", ""},
		{"bad expression", append([]string{"cron", "0 0 0 32 * ?"}, win...), ExitFailure, "", "day-of-month: value 32 out of range 1-31"},
		{"bad zone", append([]string{"cron", "0 0 * * * ?", "--tz", "Nowhere/Land"}, win...), ExitUsage, "", "--tz: unknown time zone"},
		{"bad time", []string{"cron", "0 0 * * * ?", "--from", "2024-13-01T00:00Z"}, ExitUsage, "", "--from: bad time"},
		{"bad limit", append([]string{"cron", "0 0 * * * ?", "--limit", "x"}, win...), ExitUsage, "", "invalid argument"},
		{"negative limit", append([]string{"cron", "0 0 * * * ?", "--limit", "-1"}, win...), ExitUsage, "", "must not be negative"},
		{"unknown flag", append([]string{"cron", "0 0 * * * ?", "--zone", "UTC"}, win...), ExitUsage, "", "unknown flag"},
		{"no expression", append([]string{"cron"}, win...), ExitUsage, "", "cron needs a cron EXPR"},
		{"limit 0 is no limit", []string{"cron", "0 * * * * ?", "--from", "2024-01-01T00:00Z", "--to", "2024-01-09T00:00Z", "--limit", "0"}, ExitOK, "2024-01-01T00:00:00Z\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			if !strings.HasPrefix(out.String(), tt.stdout) || (tt.stdout == "" && out.Len() != 0 && tt.code != ExitOK) {
				t.Errorf("stdout %q, want prefix %q", out.String(), tt.stdout)
			}
			if tt.stderr == "" && errb.Len() != 0 || !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q, want %q", errb.String(), tt.stderr)
			}
		})
	}
	var out bytes.Buffer
	run([]string{"cron", "0 * * * * ?", "--from", "2024-01-01T00:00Z", "--to", "2024-01-09T00:00Z", "--limit", "0"}, &out, &bytes.Buffer{})
	if n := strings.Count(out.String(), "\n"); n != 8*24*60 {
		t.Errorf("--limit 0 printed %d lines, want %d", n, 8*24*60)
	}
}
