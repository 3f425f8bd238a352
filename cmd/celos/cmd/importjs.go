package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/internal/humandur"
	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/celosjs"
	"github.com/celos-go/celos/schema/workflow"
)

func init() { register(newImportJSCmd) }

// importJSFlags are import-js's flags.
type importJSFlags struct {
	out, defaults, pkg, project string
	check, force                bool
	timeout                     time.Duration
}

func newImportJSCmd() *cobra.Command {
	var f importJSFlags
	c := &cobra.Command{
		Use:   "import-js FILE.js|DIR... -o DIR [--defaults DIR] [--check]",
		Short: "Convert Celos JavaScript workflow files to a CUE package, and prove it",
		Long: `import-js evaluates Celos JavaScript workflow files (a DIR means the *.js
files directly in it, as Celos read its workflows directory) with Celos's
JavaScript API, each in a fresh scope, and writes a CUE package to the -o
directory: project.cue, NAME.cue for each NAME.js, and defaults.cue with the
defaults-file variables the workflows use (CELOS_DEFAULT_HDFS, ...), with
comments saying where each workflow came from. Existing files are not
overwritten without --force. Workflows made by one helper function or loop
that differ in one part of their id, and in up to three other values, become
a comprehension over a list. celos.importDefaults("x") reads x.js from the
--defaults directory. docs/migrating-from-celos.md describes the whole switch.

A property function (oozieExternalService(function(slotID) {...})) is
evaluated at several slot times; each property whose values are the slot
time's fields becomes a string with ${year} ${month} ${day} ${hour}
${minute} ${second}, any other is left as a TODO comment and reported.

With --check nothing is written: the CUE package in the -o directory (as
generated, or as edited since) is compiled as celos export does and compared
with the JavaScript, workflow by workflow; each difference is printed as a
field-level diff (-javascript +cue). Property functions are compared by what
celos would submit at the sample slot times.

A file that fails (syntax error, thrown error, a call of an unknown celos.*
function, an endless loop stopped by --timeout or by the heap growing past
1 GiB) is reported as
"file:line:col: message" on stderr and not converted; the others are.
A built-in function that runs past those limits and cannot be interrupted
(new Array(5e8).fill(0)) stops the whole command half a second later,
naming its file, with nothing written; so does source nested so deeply
that the parser's stack passes 64 MiB.

Exit status: 0 everything converted (or, with --check, equal); 1 something
was not converted, left as TODO, or differs; 2 usage error.`,
		Example: `  celos import-js /etc/celos/workflows --defaults /etc/celos/defaults -o workflows
  celos import-js /etc/celos/workflows --defaults /etc/celos/defaults -o workflows --check
  celos vet workflows`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return argsError(c, "import-js needs the Celos JavaScript files to convert: FILE.js or a DIR of them")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return runImportJS(c, args, &f)
		},
	}
	c.Flags().StringVarP(&f.out, "output", "o", "", "the CUE package `DIR` to write (or, with --check, to compare)")
	c.Flags().StringVar(&f.defaults, "defaults", "", "Celos's defaults `DIR`, read by celos.importDefaults")
	c.Flags().BoolVar(&f.check, "check", false, "write nothing: compare the package in -o with the JavaScript")
	c.Flags().BoolVar(&f.force, "force", false, "overwrite the files of an earlier import in -o")
	c.Flags().StringVar(&f.pkg, "package", "", "the CUE package `NAME` (default: from the -o directory's name)")
	c.Flags().StringVar(&f.project, "project", "", "the project `NAME` written in project.cue (default: the -o directory's name)")
	c.Flags().Var(newDurationFlag(&f.timeout, celosjs.DefaultTimeout, false), "timeout", "time limit for evaluating one file, and for each property function call")
	return c
}

// runImportJS evaluates the JavaScript files args name and writes the CUE
// package (or, with --check, compares it).
func runImportJS(c *cobra.Command, args []string, f *importJSFlags) error {
	if f.out == "" {
		return usageError("import-js needs -o DIR, the directory of the CUE package")
	}
	files, err := jsFiles(args)
	if err != nil {
		return usageError("%v", err)
	}
	if f.timeout <= 0 {
		return usageError("--timeout %s: want a positive duration such as 5s", humandur.Format(f.timeout))
	}
	if f.pkg != "" {
		if err := checkPackageName(f.pkg); err != nil {
			return usageError("--package %q: %v", f.pkg, err)
		}
	}
	if f.project != "" {
		if err := workflow.ValidateProjectName(f.project); err != nil {
			return usageError("--project: %v", err)
		}
	}
	stderr := c.ErrOrStderr()
	res := celosjs.Evaluate(files, celosjs.Options{DefaultsDir: f.defaults, Timeout: f.timeout, Abandon: func(err error) {
		// A built-in function past the limits that does not stop would
		// run, and allocate, without end: the command ends here, before
		// anything is written.
		fmt.Fprintf(stderr, "%v\ncelos: import-js stopped there; nothing was written\n", err)
		os.Exit(ExitFailure)
	}})
	failed := false
	for _, p := range res.Problems {
		fmt.Fprintln(stderr, p)
		failed = true
	}
	for _, file := range res.Files {
		if file.DefinesNothing() {
			fmt.Fprintf(stderr, "%s: warning: defines no workflows\n", file.Path)
		}
	}
	if f.check {
		return checkImport(c, res, f.out, failed)
	}
	for _, t := range res.TODOs() {
		fmt.Fprintln(stderr, t)
		failed = true
	}
	if f.pkg == "" {
		f.pkg = packageFor(f.out)
	}
	if f.project == "" {
		// The directory's name, when deploy would accept it; else the
		// project is named by the package.
		if abs, err := filepath.Abs(f.out); err == nil && workflow.ValidateProjectName(filepath.Base(abs)) == nil {
			f.project = filepath.Base(abs)
		}
	}
	gen, err := celosjs.Generate(res, celosjs.GenOptions{Package: f.pkg, Project: f.project})
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if err := writeImport(c, f.out, gen, f.force); err != nil {
		return err
	}
	fmt.Fprintf(c.OutOrStdout(), "%d workflows from %d files; check them with: celos import-js --check\n", len(res.Workflows()), len(files))
	if failed {
		return silentExit(ExitFailure)
	}
	return nil
}

// writeImport writes the generated files into dir, in name order, and
// warns about other .cue files there. Without force it writes no file when
// one of them exists already.
func writeImport(c *cobra.Command, dir string, gen map[string][]byte, force bool) error {
	stderr := c.ErrOrStderr()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("create the package directory: %w", err)}
	}
	names := make([]string, 0, len(gen))
	for n := range gen {
		names = append(names, n)
	}
	sort.Strings(names)
	var exist []string
	for _, n := range names {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		if fi.IsDir() {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s is a directory, not a file the import can replace; nothing was written", filepath.Join(dir, n))}
		}
		exist = append(exist, filepath.Join(dir, n))
	}
	if len(exist) > 0 && !force {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("not overwriting %s (it may hold edits): use --force, or another -o directory; nothing was written", strings.Join(exist, ", "))}
	}
	for _, n := range names {
		path := filepath.Join(dir, n)
		if err := writeFileAtomic(path, gen[n]); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		fmt.Fprintf(c.OutOrStdout(), "wrote %s\n", path)
	}
	if others, _ := filepath.Glob(filepath.Join(dir, "*.cue")); len(others) > len(names) {
		for _, o := range others {
			if gen[filepath.Base(o)] == nil {
				fmt.Fprintf(stderr, "%s: warning: not written by this import; celos vet and --check read it too\n", o)
			}
		}
	}
	return nil
}

// checkImport compiles the package in dir and compares it with res.
func checkImport(c *cobra.Command, res *celosjs.Result, dir string, failed bool) error {
	defer tuneGC()()
	p, diags, err := schema.Compile(dir)
	printDiagnostics(c.ErrOrStderr(), diags)
	if err != nil {
		return silentExit(ExitFailure)
	}
	diffs := celosjs.Compare(res, p)
	for _, d := range diffs {
		fmt.Fprintln(c.OutOrStdout(), d)
	}
	n := len(res.Workflows())
	switch {
	case len(diffs) > 0:
		fmt.Fprintf(c.OutOrStdout(), "%d of %d workflows differ\n", len(diffs), n)
		return silentExit(ExitFailure)
	case failed:
		fmt.Fprintf(c.OutOrStdout(), "%d workflows: the same in the CUE package, but not every JavaScript file could be compared (see stderr)\n", n)
		return silentExit(ExitFailure)
	}
	fmt.Fprintf(c.OutOrStdout(), "%d workflows: the CUE package defines the same workflows as the JavaScript\n", n)
	return nil
}

// jsFiles expands the arguments: a directory means the *.js files directly
// in it, sorted.
func jsFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("workflow file or directory: %w", err)
		}
		if !fi.IsDir() {
			out = append(out, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, fmt.Errorf("read the workflows directory: %w", err)
		}
		n := 0
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".js") {
				out = append(out, filepath.Join(a, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s has no .js files", a)
		}
	}
	return out, nil
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// packageFor derives a CUE package name from a directory's name.
func packageFor(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	name := nonIdent.ReplaceAllString(filepath.Base(abs), "_")
	name = strings.Trim(name, "_")
	if name == "celos" {
		return "celos_workflows"
	}
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		name = "workflows" + name
	}
	if cueKeywords[name] {
		name += "_workflows"
	}
	return name
}

// cueKeywords cannot be a package name (CUE's parser wants an identifier
// there).
var cueKeywords = map[string]bool{"for": true, "in": true, "if": true, "let": true, "true": true, "false": true, "null": true, "func": true}

// checkPackageName refuses a --package that is not a CUE identifier.
func checkPackageName(name string) error {
	switch {
	case cueKeywords[name]:
		return errors.New("a CUE keyword, not a package name")
	case !cueIdent.MatchString(name):
		return errors.New("want a CUE identifier (letters, digits and _, not starting with a digit)")
	}
	return nil
}

var cueIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
