package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/deploy"
)

func init() { register(newUndeployCmd) }

func newUndeployCmd() *cobra.Command {
	var f deployFlags
	var missingOK bool
	c := &cobra.Command{
		Use:   "undeploy --target URL [--project NAME] [--deploy-dir DIR] [--hdfs-root PATH] [--missing-ok]",
		Short: "Remove a project's workflows and Oozie directory from a target",
		Long: `undeploy removes a project from the installation the target file describes:
first the workflows file WORKFLOWS_DIR/NAME.json (so the server stops
scheduling the project), then its Oozie directory, then the deploy
manifest. The only Oozie directory it removes is HDFS_ROOT/NAME (for the
--hdfs-root given, else the target's hdfs.root, else the default): when the
deploy manifest names it, or there is no manifest (a project deployed by
Celos CI), and never when its owner record says another workflows
directory deployed it. A directory an earlier deploy wrote under another
HDFS root is removed by an undeploy with --hdfs-root set to that root.
A missing workflows directory (a typo in the target file?) is refused.
The slot state kept by the server is not touched. It takes the project's
lock, like deploy.

Without --project, the project is the one in --deploy-dir (default: the
current directory), named as deploy names it: its project: field, else
its CUE package name.

A project that is not deployed is an error (exit 1: a typo in --project
or --target?) unless --missing-ok, which makes "nothing to undeploy"
exit 0 (a clean-up job that may run twice).

Exit status: 0 undeployed (or nothing deployed, with --missing-ok), 1
failed or not deployed, 2 usage error.`,
		Example: `  celos undeploy --target $PRODUCTION_TARGET                       # the project in the current directory
  celos undeploy --target $PRODUCTION_TARGET --project wordcount
  celos undeploy --target $STAGING_TARGET --project pr-123 --missing-ok`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if f.project == "" {
				p, _, err := compileProject(f.deployDir)
				if err != nil {
					return usageError("no --project given, and the project in %s (its name is the project to undeploy) does not compile:\n%v\npass --project NAME", f.deployDir, err)
				}
				f.project = p.Project
			}
			o, conn, err := f.options(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, stop := signalContext()
			defer stop()
			res, err := deploy.Undeploy(ctx, o)
			if err == nil && len(res.Removed) == 0 && !missingOK {
				err = fmt.Errorf("nothing to undeploy: %s is not deployed on %s (a typo in --project or --target? --missing-ok accepts this)", res.Project, res.Target)
			}
			return report(c, &f, "undeployed", res, err)
		},
	}
	f.register(c.Flags(), false, true)
	c.Flags().StringVar(&f.deployDir, "deploy-dir", ".", "the project directory, whose project is undeployed when --project is not given")
	c.Flags().BoolVar(&missingOK, "missing-ok", false, "exit 0 when the project is not deployed")
	return c
}
