// Command celos authors, checks, deploys and schedules periodic Hadoop
// workflows written in CUE. See `celos --help`.
package main

import (
	"os"

	"github.com/celos-go/celos/cmd/celos/cmd"
)

func main() { os.Exit(cmd.Main()) }
