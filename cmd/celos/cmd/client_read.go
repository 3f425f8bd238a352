package cmd

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
)

func init() {
	register(newWorkflowsCmd)
	register(newSlotsCmd)
	register(newTriggerStatusCmd)
	register(newAttemptsCmd)
}

func newWorkflowsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "workflows",
		Short: "List the workflows a celos server has loaded (GET /workflow-list)",
		Long: `List the workflows a celos server has loaded, and the workflows files
that did not load (with their error, on stderr; the exit status is then 1).`,
		Example: `  celos workflows
  CELOS_SERVER=http://celos.example.com:8080 celos workflows --json`,
		Args: noArgs,
	}
	o := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		cl, err := o.client()
		if err != nil {
			return err
		}
		var list api.WorkflowList
		body, err := cl.json(c.Context(), "GET", "/workflow-list", nil, callTimeout, &list)
		if err != nil {
			return failed(err)
		}
		if o.json {
			writeJSONOut(c.OutOrStdout(), body)
		} else {
			for _, id := range list.IDs {
				fmt.Fprintln(c.OutOrStdout(), printable(id))
			}
			for _, le := range list.LoadErrors {
				fmt.Fprintf(c.ErrOrStderr(), "not loaded: %s: %s\n", printable(le.File), printable(le.Error))
			}
		}
		if len(list.LoadErrors) > 0 {
			return silentExit(ExitFailure)
		}
		return nil
	}
	return c
}

func newSlotsCmd() *cobra.Command {
	var id, start, end string
	c := &cobra.Command{
		Use:   "slots --id WORKFLOW [--start TIME] [--end TIME]",
		Short: "Show a workflow's slots, newest first (GET /workflow-slots)",
		Long: `Show a workflow's slots in [start, end), newest first: time, status,
retry count and external job ID. end defaults to now, start to 7 days
before end (at most 7 days apart). Times are ISO 8601, e.g. 2015-09-13T13:40Z.

A slot whose stored record the server cannot read (a corrupt state file)
is listed in its place as UNREADABLE, and the server's reason follows the
table; celos rerun or celos kill of the slot rewrites the record. With
--json such slots are in the answer's "unreadable" list, not in "slots".`,
		Example: `  celos slots --id wordcount
  celos slots --id wordcount --start 2015-09-13T00:00Z --end 2015-09-14T00:00Z --json`,
		Args: workflowArg(&id),
	}
	c.Flags().StringVar(&id, "id", "", "workflow id (required; or give it as the argument)")
	c.Flags().StringVar(&start, "start", "", "first slot time (inclusive)")
	c.Flags().StringVar(&end, "end", "", "end time (exclusive, default now)")
	o := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := requireID(id); err != nil {
			return err
		}
		q := url.Values{"id": {id}}
		var from, to time.Time
		for _, f := range []struct {
			name, v string
			t       *time.Time
		}{{"start", start, &from}, {"end", end, &to}} {
			if f.v == "" {
				continue
			}
			t, err := timeFlag(f.name, f.v)
			if err != nil {
				return err
			}
			*f.t = t
			q.Set(f.name, slot.FormatTime(t))
		}
		if !from.IsZero() && !to.IsZero() && to.Before(from) {
			return usageError("--end %s is before --start %s", slot.FormatTime(to), slot.FormatTime(from))
		}
		cl, err := o.client()
		if err != nil {
			return err
		}
		var ws api.WorkflowSlots
		body, err := cl.json(c.Context(), "GET", "/workflow-slots", q, callTimeout, &ws)
		if err != nil {
			return failed(err)
		}
		if o.json {
			writeJSONOut(c.OutOrStdout(), body)
			return nil
		}
		printSlots(c.OutOrStdout(), id, ws)
		return nil
	}
	return c
}

// unreadableStatus stands in the STATUS column for a slot whose stored
// record the server cannot read (it has no status).
const unreadableStatus = "UNREADABLE"

// printSlots writes the slots newest first, those whose record the server
// cannot read in their place (status UNREADABLE), then why for each of
// those (the server's message names the slot).
func printSlots(w io.Writer, id string, ws api.WorkflowSlots) {
	if ws.Paused {
		fmt.Fprintf(w, "%s is PAUSED\n", id)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSTATUS\tRETRIES\tEXTERNAL ID")
	un := ws.Unreadable
	for _, s := range ws.Slots {
		// Both lists are newest first (times in one format sort as text).
		for ; len(un) > 0 && un[0].Time > s.Time; un = un[1:] {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\n", printable(un[0].Time), unreadableStatus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", printable(s.Time), printable(string(s.Status)), s.RetryCount, printable(orDash(s.ExternalID)))
	}
	for _, u := range un {
		fmt.Fprintf(tw, "%s\t%s\t-\t-\n", printable(u.Time), unreadableStatus)
	}
	tw.Flush()
	for _, u := range ws.Unreadable {
		fmt.Fprintln(w, printable(u.Error)) // names the slot
	}
}

func newTriggerStatusCmd() *cobra.Command {
	return slotReadCmd(&cobra.Command{
		Use:     "trigger-status --id WORKFLOW --time TIME",
		Short:   "Explain why a slot is waiting: its trigger as a tree (GET /trigger-status)",
		Example: `  celos trigger-status --id wordcount --time 2015-09-13T13:00Z`,
	}, "/trigger-status", func(w io.Writer, _ string, st triggerAnswer) {
		printTrigger(w, st.Status, 0)
		if st.Held != nil {
			fmt.Fprintf(w, "held (%s): %s\n", printable(st.Held.Op), printable(st.Held.Reason))
		}
	})
}

// triggerAnswer is the answer of GET /trigger-status: the trigger's tree,
// and why a READY slot is held (a run constraint, its pool), if it is.
type triggerAnswer struct {
	trigger.Status
	Held *struct{ Op, Reason string } `json:"held"`
}

// slotReadCmd completes c as a client command that GETs path for the slot
// named by --id and --time and prints the answer with print, or as JSON
// with --json.
func slotReadCmd[T any](c *cobra.Command, path string, print func(w io.Writer, id string, v T)) *cobra.Command {
	var id, at string
	c.Args = workflowArg(&id)
	c.Flags().StringVar(&id, "id", "", "workflow id (required; or give it as the argument)")
	c.Flags().StringVar(&at, "time", "", "slot time (required)")
	o := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		t, err := requireSlot(id, at)
		if err != nil {
			return err
		}
		cl, err := o.client()
		if err != nil {
			return err
		}
		var v T
		body, err := cl.json(c.Context(), "GET", path, slotQuery(id, t), callTimeout, &v)
		if err != nil {
			return failed(err)
		}
		if o.json {
			writeJSONOut(c.OutOrStdout(), body)
			return nil
		}
		print(c.OutOrStdout(), id, v)
		return nil
	}
	return c
}

// maxTriggerDepth is the depth to which trigger-status shows the tree (a
// real one is a handful of levels): the indentation of a tree nested
// thousands deep, from a hostile server, would be the square of its depth.
const maxTriggerDepth = 32

// printTrigger writes the status tree, one trigger a line, indented; below
// maxTriggerDepth it counts the triggers instead.
func printTrigger(w io.Writer, st trigger.Status, depth int) {
	if depth == maxTriggerDepth {
		fmt.Fprintf(w, "%s... %d triggers below not shown (--json shows them)\n", strings.Repeat("  ", depth), countTriggers(st))
		return
	}
	mark := "not ready"
	if st.Ready {
		mark = "ready"
	}
	fmt.Fprintf(w, "%s[%s] %s: %s\n", strings.Repeat("  ", depth), mark, printable(string(st.Type)), printable(st.Description))
	if st.Error != "" {
		fmt.Fprintf(w, "%s  error: %s\n", strings.Repeat("  ", depth), printable(st.Error))
	}
	for _, s := range st.SubStatuses {
		printTrigger(w, s, depth+1)
	}
}

// countTriggers counts the triggers of a tree.
func countTriggers(st trigger.Status) int {
	n := 1
	for _, s := range st.SubStatuses {
		n += countTriggers(s)
	}
	return n
}

func newAttemptsCmd() *cobra.Command {
	return slotReadCmd(&cobra.Command{
		Use:   "attempts --id WORKFLOW --time TIME",
		Short: "List every attempt of a slot: status, times, external ID (GET /slot-attempts)",
		Long: `List every attempt the slot's external service knows of, oldest first:
its status (a command's exit code, Oozie's job status), when it was
submitted, started and ended, and its external ID. The slot's state now is
the first line.`,
		Example: `  celos attempts --id wordcount --time 2015-09-13T13:00Z`,
	}, "/slot-attempts", printAttempts)
}

// printAttempts writes the slot's state, then a table of its attempts.
func printAttempts(w io.Writer, id string, sa api.SlotAttempts) {
	fmt.Fprintf(w, "%s@%s: %s (retryCount %d)\n", id, printable(sa.Slot.Time), printable(string(sa.Slot.Status)), sa.Slot.RetryCount)
	if len(sa.Attempts) == 0 {
		fmt.Fprintln(w, "no attempts")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSTATUS\tSUBMITTED\tSTARTED\tENDED\tEXTERNAL ID")
	for i, a := range sa.Attempts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, printable(string(a.Status)), timeOrDash(a.Submitted), timeOrDash(a.Started), timeOrDash(a.Ended), printable(a.ExternalID))
	}
	tw.Flush()
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return slot.FormatTime(t)
}
