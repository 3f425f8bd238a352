package cmd

import (
	"os"
	"regexp"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() { scriptCmds["maskdurations"] = cmdMaskDurations }

// durationPatterns are the times celos test prints, which vary from run
// to run.
var durationPatterns = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\(\d+\.\d\ds\)`), "(N.NNs)"},
	{regexp.MustCompile(`\t\d+\.\d\d\ds\t`), "\tN.NNNs\t"},
	{regexp.MustCompile(`time="\d+\.\d+"`), `time="N"`},
	{regexp.MustCompile(`timestamp="[0-9T:-]+"`), `timestamp="T"`},
}

// maskdurations FILE...: replace the durations and timestamps celos test
// prints with placeholders, in place, so that goldens can be exact.
func cmdMaskDurations(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: maskdurations FILE...")
	}
	for _, a := range args {
		p := ts.MkAbs(a)
		data, err := os.ReadFile(p)
		ts.Check(err)
		for _, d := range durationPatterns {
			data = d.re.ReplaceAll(data, []byte(d.with))
		}
		ts.Check(os.WriteFile(p, data, 0o644))
	}
}
