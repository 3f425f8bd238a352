package cmd

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/schema"
	"github.com/celos-go/celos/schema/scaffold"
)

func init() { register(newInitCmd) }

func newInitCmd() *cobra.Command {
	var (
		name         string
		force        bool
		updateSchema bool
	)
	c := &cobra.Command{
		Use:   "init DIR",
		Short: "Create a new project: CUE workflows, Oozie directory, CI files",
		Long: `init creates a working celos project in DIR (created if missing):

  workflows.cue                   the two-data-centre wordcount example
  tests.cue, test/                a test case for it and its fixtures (celos test)
  hdfs/workflow.xml               the Oozie workflow it runs (uploaded by deploy)
  cue.mod/                        the CUE module, with the celos schema vendored
                                  in cue.mod/pkg/celos.dev/celos, so that plain
                                  "cue vet -c ./..." works offline
  .pre-commit-config.yaml         celos vet before every commit
  .github/workflows/deploy.yml    GitHub Actions: vet, test and plan on pull
                                  requests, deploy on push to main
  Jenkinsfile                     the same as a Jenkins pipeline

The CI files and the pre-commit hook are pinned to this celos's version.
  README.md

The project is named after DIR unless --name says otherwise. A DIR that is
not empty is refused unless --force is given (files of the scaffold are
then overwritten, others left alone).

--update-schema only rewrites the vendored schema of an existing project
with the one built into this celos (do it after upgrading celos, when
celos vet warns that the vendored schema differs).`,
		Example: `  celos init wordcount && cd wordcount && celos vet && celos export
  celos init --name reports ./workflows
  celos init --update-schema .`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageError("init needs exactly one DIR\nRun 'celos init --help' for usage.")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			dir := args[0]
			out := c.OutOrStdout()
			if updateSchema {
				if name != "" || force {
					return usageError("--update-schema takes no --name or --force")
				}
				files, err := scaffold.UpdateSchema(dir)
				if err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				for _, f := range files {
					fmt.Fprintf(out, "wrote %s\n", filepath.Join(dir, f))
				}
				return nil
			}
			files, err := scaffold.Write(dir, scaffold.Options{Name: name, Force: force, Rev: version()})
			if err != nil {
				if errors.Is(err, scaffold.ErrNotEmpty) {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				return &ExitError{Code: ExitFailure, Err: err}
			}
			for _, f := range files {
				fmt.Fprintf(out, "wrote %s\n", filepath.Join(dir, f))
			}
			fmt.Fprintf(out, "\nNext:\n  cd %s\n  celos vet          # check\n  celos test         # run the test case\n  celos export       # the compiled JSON\n  cue vet -c ./...   # plain CUE works too (schema %s vendored)\n", dir, schema.SchemaImportPath)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "project `NAME` (default: the base name of DIR)")
	c.Flags().BoolVar(&force, "force", false, "write into a directory that is not empty")
	c.Flags().BoolVar(&updateSchema, "update-schema", false, "only rewrite the vendored schema of the project in DIR")
	return c
}
