package cmd

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExamples: the README says every command's --help has
// examples. Before, kill, pause, unpause, step, workflows, version and db
// had none. Cobra's own completion and help commands are not ours.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "completion" || sub.Name() == "help" {
				continue
			}
			if sub.Example == "" {
				t.Errorf("celos %s --help has no examples", sub.CommandPath()[len("celos "):])
			}
			walk(sub)
		}
	}
	walk(New())
}
