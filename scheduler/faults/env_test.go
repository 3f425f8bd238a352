package faults

import (
	"os"
	"testing"
)

// skipOrFailInCI skips a test that this machine cannot run (no root, no
// tmpfs mount, no chattr), with the reason. In CI (CI=true) it fails
// instead: CI runs as root on a normal machine, where every fault test
// must run, and a silent skip there would hide a broken environment.
func skipOrFailInCI(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true, and this test cannot run here (CI must run every fault test, as root): "+format, args...)
	}
	t.Skipf(format, args...)
}
