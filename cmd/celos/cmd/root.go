// Package cmd implements the celos command line: one file per subcommand,
// each registered on the root command by an init function, so that the
// binary's main is one line and the commands can be tested in-process
// (testscript scripts under testdata/script).
package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and found a problem (invalid project, failed deploy)
	ExitUsage   = 2 // bad flags or arguments
)

// ExitError carries an exit code out of a command. Its message, if any, is
// printed to stderr as "celos: <message>".
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks an error as a usage error (exit 2).
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// silentExit ends a command with a code after it has printed its own report.
func silentExit(code int) error { return &ExitError{Code: code} }

var commands []func() *cobra.Command

// register adds a subcommand constructor; called from init functions of the
// files in this package.
func register(c func() *cobra.Command) { commands = append(commands, c) }

// Version is the celos version, set by -ldflags "-X .../cmd.Version=v1.2.3"
// or read from the module build info.
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// New returns the root command with every registered subcommand.
func New() *cobra.Command {
	root := &cobra.Command{
		Use:   "celos",
		Short: "Write, check, deploy and schedule periodic Hadoop workflows in CUE",
		Long: `celos turns periodic Hadoop workflows written in CUE into time slots that
wait for their data and run as Oozie jobs (or local commands).

  author    celos init, celos vet, celos export, celos cron, celos test,
            celos import-js
  deploy    celos deploy, celos undeploy, celos plan, celos deployments
  schedule  celos server, and a client for its HTTP API
            (celos workflows, slots, attempts, trigger-status, rerun, kill,
            pause, unpause, step)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("celos {{.Version}}\n")
	root.AddCommand(&cobra.Command{
		Use:     "version",
		Short:   "Print the celos version",
		Example: "  celos version",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "celos %s\n", version())
			return nil
		},
	})
	subs := make([]*cobra.Command, 0, len(commands))
	for _, c := range commands {
		subs = append(subs, c())
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
	root.AddCommand(subs...)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	return root
}

// Main runs the command line with os.Args and returns the exit code.
func Main() int { return run(os.Args[1:], os.Stdout, os.Stderr) }

func run(args []string, stdout, stderr io.Writer) int {
	root := New()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(stderr, "celos: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(stderr, "celos: %v\n", err)
	// cobra reports unknown commands and bad argument counts as plain errors.
	if isUsage(err) {
		return ExitUsage
	}
	return ExitFailure
}

// noArgs refuses arguments to a command that takes none, saying so
// (cobra.NoArgs says "unknown command", as if a subcommand were meant).
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return argsError(c, "%s takes no arguments, got %q", c.Name(), args[0])
	}
	return nil
}

// workflowArg lets a client command take its workflow as its one
// argument (celos slots wordcount), as well as --id.
func workflowArg(id *string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return nil
		case len(args) > 1:
			return argsError(c, "%s takes one WORKFLOW (or --id WORKFLOW), got %d arguments", c.Name(), len(args))
		case *id != "" && *id != args[0]:
			return argsError(c, "%s: the workflow is given twice, --id %s and %s: give it once", c.Name(), printable(*id), printable(args[0]))
		}
		*id = args[0]
		return nil
	}
}
