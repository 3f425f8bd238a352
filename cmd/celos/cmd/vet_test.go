package cmd

import (
	"bytes"
	"os"
	"path/filepath"
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
		{[]string{"vet", good, bad}, ExitUsage, "accepts at most 1 arg"},
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
