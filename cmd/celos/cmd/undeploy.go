package cmd

import (
	"github.com/spf13/cobra"

	"github.com/celos-go/celos/deploy"
)

func init() { register(newUndeployCmd) }

func newUndeployCmd() *cobra.Command {
	var f deployFlags
	c := &cobra.Command{
		Use:   "undeploy --target URL --project NAME [--hdfs-root PATH]",
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

Exit status: 0 undeployed (or nothing was deployed), 1 failed, 2 usage error.`,
		Example: `  celos undeploy --target $PRODUCTION_TARGET --project wordcount`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if f.project == "" {
				return usageError("--project is required")
			}
			o, conn, err := f.options(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, stop := signalContext()
			defer stop()
			res, err := deploy.Undeploy(ctx, o)
			return report(c, &f, "undeployed", res, err)
		},
	}
	f.register(c.Flags(), false, true)
	return c
}
