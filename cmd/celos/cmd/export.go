package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/internal/atomicfile"
)

func init() { register(newExportCmd) }

func newExportCmd() *cobra.Command {
	var out string
	var noCache bool
	c := &cobra.Command{
		Use:   "export [DIR] [-o FILE]",
		Short: "Compile a project to the JSON document the server runs",
		Long: `export compiles the CUE package in DIR (default: the current directory),
checks it as celos vet does, and writes the compiled JSON document: one per
project, with a "format" version field, the workflows sorted by id and every
default written out. The same input always gives byte-identical output.
This document is what celos deploy uploads and what celos server loads.

Problems are printed as "file:line:col: message" on stderr; warnings do not
stop the export, errors do (exit 1, and nothing is written). With -o the
file is replaced atomically (written beside it, synced, renamed), so a
reader never sees half a document. An unchanged project is answered from
celos's cache, as celos vet's (--no-cache: compile from scratch).`,
		Example: `  celos export                      # the project here, to stdout
  celos export ./workflows -o wordcount.json
  celos export | jq '.workflows[].id'`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return argsError(c, "export takes at most one DIR, the project directory (the output file is -o FILE); got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			r, err := compileArg(c, args, noCache)
			if err != nil {
				return err
			}
			data := r.JSON
			if out == "" || out == "-" {
				_, err = c.OutOrStdout().Write(data)
				return err
			}
			if err := writeOutput(out, data); err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "write the document to `FILE` instead of stdout (a file is replaced atomically; a FIFO or device is written to)")
	c.Flags().BoolVar(&noCache, "no-cache", false, "compile from scratch: neither read nor write celos's cache")
	return c
}

// writeFileAtomic replaces path with data (temporary file, fsync, rename,
// fsync of the directory), refusing a directory, and a path whose
// directory is missing or not one, with a clear message (not the name of
// the temporary file it could not create).
func writeFileAtomic(path string, data []byte) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("write %s: is a directory", path)
	}
	if err := checkParent(path); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644, true)
}

// writeOutput writes data to -o's path as atomicfile.WriteOutput does (a
// file replaced atomically, a FIFO or device written to), naming a
// missing parent directory rather than the temporary file.
func writeOutput(path string, data []byte) error {
	if err := checkParent(path); err != nil {
		return err
	}
	return atomicfile.WriteOutput(path, data, 0o644)
}

// checkParent refuses a path whose directory is missing or not one.
func checkParent(path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write %s: the directory %s does not exist", path, dir)
	} else if err == nil && !fi.IsDir() || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("write %s: %s is not a directory", path, dir)
	}
	return nil
}
