package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/schema"
)

func init() { register(newVetCmd) }

func newVetCmd() *cobra.Command {
	var noCache bool
	c := &cobra.Command{
		Use:   "vet [DIR]",
		Short: "Check a project: schema, cron expressions, references",
		Long: `vet loads the CUE package in DIR (default: the current directory) with the
schema built into celos, requires every value to be concrete, and checks
what the schema cannot: that cron expressions parse and time zones exist.
A dependent schedule or success trigger naming a workflow that is not in
the project is a warning (it may live in another project).

Problems are printed as "file:line:col: message" on stderr, relative to
the working directory, every workflow's in one run (within one workflow,
CUE may hold a second error back until the first is fixed). Nothing is
printed for a valid project.

No network is used: the schema is embedded in celos, and a project that
vendors its own copy (cue.mod/pkg/celos.dev/celos, written by celos init)
gets a warning when that copy differs from celos's. A project may import
the CUE standard library and packages vendored under cue.mod/pkg.

The answer for a project whose files have not changed comes from celos's
cache (` + "`$CELOS_CACHE_DIR`" + `, else the user cache directory's celos/; keyed
by the content of every file the check reads and by the celos build);
--no-cache, or CELOS_CACHE_DIR=off, checks from scratch.

Exit status: 0 valid (warnings allowed), 1 invalid, 2 usage error.`,
		Example: `  celos vet                 # the project in the current directory
  celos vet ./workflows     # another directory

  # as a pre-commit hook (.pre-commit-config.yaml):
  #   - repo: https://github.com/celos-go/celos
  #     rev: v1.0.0
  #     hooks: [{id: celos-vet}]`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			_, err := compileArg(c, args, noCache)
			return err
		},
	}
	c.Flags().BoolVar(&noCache, "no-cache", false, "check from scratch: neither read nor write celos's cache")
	return c
}

// tuneGC lets the heap grow to three times the live data between
// collections while a project is compiled (unless GOGC says otherwise):
// CUE evaluation allocates a lot of short-lived memory, and this cuts the
// CPU time of compiling 1,000 workflows by about a third for some 20% more
// peak memory (docs/authoring.md, BenchmarkExportCLI1000). It returns the
// function that restores the previous setting.
func tuneGC() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(200)
	return func() { debug.SetGCPercent(old) }
}

// printDiagnostics writes one "file:line:col: message" line per diagnostic.
func printDiagnostics(w io.Writer, diags []schema.Diagnostic) {
	for _, d := range diags {
		fmt.Fprintln(w, d.String())
	}
}

// compileArg compiles the project named by the optional DIR argument (the
// current directory by default), from the cache unless noCache, printing
// its diagnostics to stderr; an invalid project ends the command with
// exit 1.
func compileArg(c *cobra.Command, args []string, noCache bool) (*schema.Compiled, error) {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	defer tuneGC()()
	r := schema.CompileCached(dir, compileCache(noCache))
	printDiagnostics(c.ErrOrStderr(), r.Diags)
	if r.Err != nil {
		var diags schema.Diagnostics
		if !errors.As(r.Err, &diags) {
			fmt.Fprintf(c.ErrOrStderr(), "celos: %v\n", r.Err)
		}
		return nil, silentExit(ExitFailure)
	}
	return r, nil
}
