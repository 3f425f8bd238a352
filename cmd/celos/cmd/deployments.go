package cmd

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/deploy"
)

func init() { register(newDeploymentsCmd) }

func newDeploymentsCmd() *cobra.Command {
	var f deployFlags
	c := &cobra.Command{
		Use:   "deployments --target URL [--json]",
		Short: "List the projects deployed to a target: commit, dirty tree, time, who",
		Long: `deployments lists every project deployed through the target's workflows
directory (a workflows file NAME.json), with what its deploy manifest
records: the git commit, whether the tree had uncommitted changes
("dirty"), when and by whom (user@host) it was deployed. A project
without a manifest (deployed by Celos CI, or by hand) is listed with
dashes. Nothing is changed and no lock is taken.

Exit status: 0 listed (also when nothing is deployed), 1 failed, 2 usage
error.`,
		Example: `  celos deployments --target $PRODUCTION_TARGET
  celos deployments --target $PRODUCTION_TARGET --json | jq -r '.deployments[] | select(.gitDirty) | .project'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o, conn, err := f.options(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, stop := signalContext()
			defer stop()
			target, ds, err := deploy.Deployments(ctx, o)
			if f.line != nil {
				f.line.clear()
			}
			if err != nil {
				if f.asJSON {
					writeJSON(c.OutOrStdout(), map[string]any{"ok": false, "error": err.Error()})
				}
				return &ExitError{Code: ExitFailure, Err: err}
			}
			if ds == nil {
				ds = []deploy.Deployment{}
			}
			if f.asJSON {
				writeJSON(c.OutOrStdout(), struct {
					OK          bool                `json:"ok"`
					Target      string              `json:"target"`
					Deployments []deploy.Deployment `json:"deployments"`
				}{true, target, ds})
				return nil
			}
			writeDeployments(c.OutOrStdout(), target, ds)
			return nil
		},
	}
	fs := c.Flags()
	fs.StringVar(&f.target, "target", "", "the target file: a file: or sftp: URL (or a local path)")
	f.sshFlags.register(fs)
	fs.BoolVar(&f.asJSON, "json", false, "print the list as JSON on stdout")
	return c
}

// writeDeployments prints the listing as a table.
func writeDeployments(w io.Writer, target string, ds []deploy.Deployment) {
	if len(ds) == 0 {
		fmt.Fprintf(w, "No project is deployed on %s\n", target)
		return
	}
	fmt.Fprintf(w, "%d project(s) deployed on %s:\n", len(ds), target)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tWORKFLOWS\tCOMMIT\tDEPLOYED\tBY")
	for _, d := range ds {
		if !d.Manifest {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t- (no deploy manifest: Celos CI or by hand)\n", deploy.Shown(d.Project))
			continue
		}
		commit := "-"
		if d.GitCommit != "" {
			commit = deploy.Shown(fmt.Sprintf("%.12s", d.GitCommit))
		}
		if d.GitDirty {
			commit += " (dirty)"
		}
		by := deploy.Shown(d.User)
		if d.Host != "" {
			by += "@" + deploy.Shown(d.Host)
		}
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", deploy.Shown(d.Project), d.Workflows, commit, deployedAt(d.DeployedAt), by)
	}
	tw.Flush()
}

func deployedAt(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
