package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/deploy"
)

func init() { register(newPlanCmd) }

// Exit codes of plan and deploy --dry-run, for CI to gate on.
const (
	ExitNoChanges = 0
	ExitChanges   = 2
)

func newPlanCmd() *cobra.Command {
	var f deployFlags
	c := &cobra.Command{
		Use:   "plan --target URL [--project NAME] [--deploy-dir DIR] [--hdfs-root PATH]",
		Short: "Show what a deploy would change (dry run)",
		Long: `plan compiles the project and compares it with what the target holds,
changing nothing and taking no lock:

  workflows added, removed and changed, with a field-level diff of the
  compiled JSON (schedule.cron: "0 0 * * * ?" -> "0 30 * * * ?");
  files of the Oozie directory added, removed and changed (by size, then
  by content: the deploy manifest's checksums while a file's size and time
  are unchanged, else the file is read back), with a unified diff of each
  changed text file (its first 40 lines; --diff shows all) and sizes only
  for binary files and files over 512 kB.

It fails (exit 1) where deploy would refuse before touching anything (a
missing workflows or defaults directory unless --create-dirs, an HDFS
directory overlapping them or owned by another workflows directory, a
workflow id another project deploys, an unsafe file in hdfs/), and warns
when a workflow's oozie.wf.application.path is not under HDFS_ROOT/NAME
(deploy refuses that unless --allow-foreign-app-path). Warnings go to
stderr, and to "warnings" with --json.

celos deploy --dry-run is the same.

Exit status: 0 no change, 2 changes, 1 error (usage errors too, so that 2
always means "changes").`,
		Example: `  celos plan --target $PRODUCTION_TARGET
  celos plan --target $PRODUCTION_TARGET --json | jq .workflowsChanged

  # CI: tell "no change" (0) from "changes" (2) and errors (1)
  celos plan --target $PRODUCTION_TARGET --quiet; case $? in 0) ;; 2) echo changes ;; *) exit 1 ;; esac`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("plan takes no arguments, got %q", args)}
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return runPlan(c, &f) },
	}
	f.register(c.Flags(), true, false)
	c.Flags().BoolVar(&f.diffAll, "diff", false, "show all of each changed text file's diff (default: the first 40 lines)")
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	return c
}

// runPlan is celos plan and celos deploy --dry-run.
func runPlan(c *cobra.Command, f *deployFlags) error {
	o, conn, err := f.options(c)
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) {
			ee.Code = ExitFailure
		}
		return err
	}
	defer conn.Close()
	ctx, stop := signalContext()
	defer stop()
	p, err := deploy.MakePlan(ctx, o)
	if f.line != nil {
		f.line.clear()
	}
	if err != nil {
		if f.asJSON {
			writeJSON(c.OutOrStdout(), map[string]any{"ok": false, "error": err.Error()})
		}
		return &ExitError{Code: ExitFailure, Err: err}
	}
	switch {
	case f.asJSON:
		writeJSON(c.OutOrStdout(), struct {
			OK      bool `json:"ok"`
			Changes bool `json:"changes"`
			*deploy.Plan
		}{true, p.HasChanges(), p})
	case f.quiet:
	case f.diffAll:
		p.WriteTextDiff(c.OutOrStdout(), -1)
	default:
		p.WriteText(c.OutOrStdout())
	}
	if p.HasChanges() {
		return silentExit(ExitChanges)
	}
	return nil
}
