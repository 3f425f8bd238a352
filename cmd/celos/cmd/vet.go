package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/scheduler/pool"
	"github.com/celos-go/celos/schema"
)

func init() { register(newVetCmd) }

func newVetCmd() *cobra.Command {
	var noCache bool
	var poolsFile string
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

With --pools FILE (the installation's pools file, as celos server --pools
reads it), a workflow naming a pool the file does not define is an error
at its pool field.

Exit status: 0 valid (warnings allowed), 1 invalid, 2 usage error.`,
		Example: `  celos vet                 # the project in the current directory
  celos vet ./workflows     # another directory

  # as a pre-commit hook (.pre-commit-config.yaml):
  #   - repo: https://github.com/celos-go/celos
  #     rev: v1.0.0
  #     hooks: [{id: celos-vet}]`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return argsError(c, "vet takes at most one DIR, the project directory; got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			var opts schema.Options
			if poolsFile != "" {
				pools, _, err := pool.NewFile(poolsFile).Load()
				if err != nil {
					return &ExitError{Code: ExitFailure, Err: fmt.Errorf("pools file %s: %w", poolsFile, err)}
				}
				opts = schema.Options{Pools: pools, PoolsFile: poolsFile}
			}
			_, err := compileArgWith(c, args, noCache, false, opts)
			return err
		},
	}
	c.Flags().BoolVar(&noCache, "no-cache", false, "check from scratch: neither read nor write celos's cache")
	c.Flags().StringVar(&poolsFile, "pools", "", "the installation's pools file: a workflow naming another pool is an error")
	return c
}

// argsError is the usage error of a command's arguments: what it takes,
// and where to read more (cobra's own says "accepts 1 arg(s), received 6").
func argsError(c *cobra.Command, format string, args ...any) error {
	return usageError(format+"\nRun '%s --help' for usage.", append(args, c.CommandPath())...)
}

// tuneGC lets the heap grow to three times the live data between
// collections while a project is compiled (unless GOGC says otherwise):
// CUE evaluation allocates a lot of short-lived memory, and this cuts the
// CPU time of compiling 1,000 workflows by about a third for some 20% more
// peak memory (docs/authoring.md, BenchmarkExportCLI1000). It returns the
// function that restores the previous settings (boundHeap's limit too).
func tuneGC() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(200)
	oldLimit := debug.SetMemoryLimit(-1)
	return func() {
		debug.SetGCPercent(old)
		debug.SetMemoryLimit(oldLimit)
	}
}

// boundHeap is called (schema.Options.Evaluated) once CUE has evaluated
// the project, before its workflows are converted to Go. Converting
// allocates about as much short-lived memory as the evaluated package
// holds (an evaluation context per field looked up, some 40 kB a
// workflow), and with GOGC=200 all of it would pile onto the peak. This
// sets a soft memory limit at what the process holds at that point plus
// half the live heap, so that most of the conversion's garbage is
// collected within the memory the evaluation already took, at the cost
// of about one collection (a tighter limit costs more CPU than the 10%
// over `cue vet -c` celos allows itself: docs/benchmarks.md, "vet: a
// soft memory limit after the evaluation"). It does nothing when GOGC
// or GOMEMLIMIT is set; tuneGC's restore lifts the limit.
func boundHeap() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(s)
	for _, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			return
		}
	}
	held := int64(s[0].Value.Uint64() - s[1].Value.Uint64())
	debug.SetMemoryLimit(heapLimit(held, int64(s[2].Value.Uint64())))
}

// heapLimit is boundHeap's limit for a process holding held bytes with
// live bytes of heap live at the last collection: half the live heap
// more, which leaves at least that much room for garbage whenever the
// last collection happened.
func heapLimit(held, live int64) int64 {
	return held + live/2
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
	return compileArgWith(c, args, noCache, true, schema.Options{})
}

// compileArgWith is compileArg with compile options (vet --pools); with
// needJSON false and no cache to store an entry in, the result has no
// JSON (vet reads nothing but the diagnostics, and the document of 1,000
// workflows costs about 10 MB of allocations to make).
func compileArgWith(c *cobra.Command, args []string, noCache, needJSON bool, opts schema.Options) (*schema.Compiled, error) {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	defer tuneGC()()
	opts.Evaluated = boundHeap
	var r *schema.Compiled
	if cc := compileCache(noCache); cc != nil || needJSON {
		r = schema.CompileCachedWith(dir, cc, opts)
	} else {
		p, diags, err := schema.CompileWith(dir, opts)
		r = &schema.Compiled{Project: p, Diags: diags, Err: err}
	}
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
