package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestAuthoringExitCodes checks the exit statuses of vet, export and init
// (testscript only tells zero from non-zero).
func TestAuthoringExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(p, 0o755)
		if err := os.WriteFile(filepath.Join(p, "p.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", `package p
workflows: a: {
	schedule: {type: "cron", cron: "0 0 * * * ?"}
	trigger: {type: "success", workflow: "other"}
	externalService: {type: "command", command: ["true"]}
}
`)
	bad := write("bad", "package p\nworkflows: a: {}\n")
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"vet", good}, ExitOK, "warning: workflows.a.trigger.workflow"},
		{[]string{"vet", bad}, ExitFailure, "workflows.a.trigger: missing required field"},
		{[]string{"vet", filepath.Join(dir, "none")}, ExitFailure, "no such directory"},
		{[]string{"vet", good, bad}, ExitUsage, "vet takes at most one DIR"},
		{[]string{"vet", "--nope"}, ExitUsage, "unknown flag"},
		{[]string{"export", good, "-o", filepath.Join(dir, "out.json")}, ExitOK, "warning:"},
		{[]string{"export", bad}, ExitFailure, "missing required field"},
		{[]string{"export", "-o"}, ExitUsage, "flag needs an argument"},
		{[]string{"export", good, "-o", filepath.Join(dir, "no", "such", "dir", "out.json")}, ExitFailure, "write "},
		{[]string{"init"}, ExitUsage, "init needs exactly one DIR"},
		{[]string{"init", good}, ExitFailure, "directory is not empty"},
		{[]string{"init", filepath.Join(dir, "new")}, ExitOK, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("celos %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.code, tc.stderr)
		}
	}
}

// TestBoundHeap checks the soft memory limit compiling sets once CUE has
// evaluated the project: at least what the process holds, lifted by
// tuneGC's restore, and left alone when GOGC or GOMEMLIMIT is set.
func TestBoundHeap(t *testing.T) {
	const mb = 1 << 20
	if got, want := heapLimit(120*mb, 48*mb), int64(144*mb); got != want {
		t.Errorf("heapLimit(120 MB held, 48 MB live) = %d MB, want %d MB", got/mb, want/mb)
	}

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOGC")
	os.Unsetenv("GOMEMLIMIT")
	before := debug.SetMemoryLimit(-1)
	restore := tuneGC()
	boundHeap()
	limit := debug.SetMemoryLimit(-1)
	restore()
	if after := debug.SetMemoryLimit(-1); after != before {
		t.Errorf("after restore the limit is %d, want %d as before", after, before)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if limit >= before || limit < int64(ms.HeapAlloc) {
		t.Errorf("boundHeap set the limit to %d (before %d, heap %d)", limit, before, ms.HeapAlloc)
	}

	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "100")
			boundHeap()
			if got := debug.SetMemoryLimit(-1); got != before {
				t.Errorf("with %s set the limit is %d, want %d", env, got, before)
			}
		})
	}
}
