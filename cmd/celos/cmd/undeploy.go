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
manifest. With a manifest (written by celos deploy) it removes exactly what
the last deploy wrote, wherever --hdfs-root pointed then; without one (a
project deployed by Celos CI) it removes NAME.json and HDFS_ROOT/NAME.
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
