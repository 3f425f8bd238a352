package cmd

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/slot"
)

func init() {
	register(newRerunCmd)
	register(newKillCmd)
	register(func() *cobra.Command { return newPauseCmd(true) })
	register(func() *cobra.Command { return newPauseCmd(false) })
	register(newStepCmd)
}

func newRerunCmd() *cobra.Command {
	var id, at, from, to string
	var dryRun bool
	c := &cobra.Command{
		Use:   "rerun --id WORKFLOW (--time TIME | --from TIME --to TIME [--dry-run])",
		Short: "Rerun a slot, or every slot of a time range (backfill) (POST /rerun)",
		Long: `Rerun a slot: reset it to WAITING with retry count 0 and mark it, so that
the scheduler takes it even when it is older than 7 days. Only a final slot
(SUCCESS, FAILURE, WAIT_TIMEOUT, KILLED), or one that never ran, can be rerun.

A slot the schedule has not reached yet (after the server's clock) or
before the workflow's startTime is refused with the reason: it runs at its
time, and a rerun must not run it early.

With --from and --to (both inclusive) every slot of the workflow's schedule
in the range is rerun, oldest first: a backfill. Slots in progress (READY,
RUNNING), slots not due yet and the part of the range before the
workflow's startTime are skipped, each listed with why. --dry-run asks the
server about each slot (GET /rerun) and lists what would be rerun and what
would be skipped, changing nothing.`,
		Example: `  celos rerun --id wordcount --time 2015-09-13T13:00Z
  celos rerun --id wordcount --from 2015-08-01T00:00Z --to 2015-08-31T23:00Z --dry-run`,
		Args: cobra.NoArgs,
	}
	c.Flags().StringVar(&id, "id", "", "workflow id (required)")
	c.Flags().StringVar(&at, "time", "", "slot time")
	c.Flags().StringVar(&from, "from", "", "first slot time of a range (inclusive)")
	c.Flags().StringVar(&to, "to", "", "last slot time of a range (inclusive)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "with --from/--to: list the slots, rerun nothing")
	o := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := requireID(id); err != nil {
			return err
		}
		switch {
		case at != "" && (from != "" || to != ""):
			return usageError("give --time, or --from and --to, not both")
		case at != "":
			if dryRun {
				return usageError("--dry-run goes with --from and --to")
			}
			t, err := timeFlag("time", at)
			if err != nil {
				return err
			}
			return slotAction(c, o, "/rerun", id, t)
		case from != "" && to != "":
			f, err := timeFlag("from", from)
			if err != nil {
				return err
			}
			t, err := timeFlag("to", to)
			if err != nil {
				return err
			}
			if t.Before(f) {
				return usageError("--to %s is before --from %s", slot.FormatTime(t), slot.FormatTime(f))
			}
			return backfill(c, o, id, f, t, dryRun)
		}
		return usageError("give --time, or --from and --to")
	}
	return c
}

func newKillCmd() *cobra.Command {
	var id, at string
	c := &cobra.Command{
		Use:   "kill --id WORKFLOW --time TIME",
		Short: "Kill a slot: stop its external job and mark it KILLED (POST /kill)",
		Args:  cobra.NoArgs,
	}
	c.Flags().StringVar(&id, "id", "", "workflow id (required)")
	c.Flags().StringVar(&at, "time", "", "slot time (required)")
	o := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		t, err := requireSlot(id, at)
		if err != nil {
			return err
		}
		return slotAction(c, o, "/kill", id, t)
	}
	return c
}

// slotAction POSTs /rerun or /kill for one slot and prints the slot after.
func slotAction(c *cobra.Command, o *clientOpts, path, id string, t time.Time) error {
	cl, err := o.client()
	if err != nil {
		return err
	}
	var s api.Slot
	body, err := cl.json(c.Context(), "POST", path, slotQuery(id, t), callTimeout, &s)
	if err != nil {
		return failed(err)
	}
	if o.json {
		writeJSONOut(c.OutOrStdout(), body)
		return nil
	}
	fmt.Fprintf(c.OutOrStdout(), "%s@%s: %s\n", id, s.Time, s.Status)
	return nil
}

// backfillRow is one slot of a range rerun, as --json prints it.
type backfillRow struct {
	Time string `json:"time"`
	// Until, on the row of the part of the range before the workflow's
	// startTime (which has no slots), is that startTime (exclusive).
	Until  string      `json:"until,omitempty"`
	Status slot.Status `json:"status,omitempty"` // before the rerun
	// Action is "rerun", "would rerun" (--dry-run), "skipped" or "failed".
	Action string `json:"action"`
	// Error says why a slot was skipped or failed.
	Error string `json:"error,omitempty"`
}

// backfill reruns every slot of [from, to]: it lists them with GET
// /workflow-slots (7 days per request) and POSTs /rerun for each, oldest
// first; with dryRun it asks GET /rerun instead, which answers as POST
// would without changing anything. The part of the range before the
// workflow's startTime is one skipped row (the server lists no slots
// there).
func backfill(c *cobra.Command, o *clientOpts, id string, from, to time.Time, dryRun bool) error {
	cl, err := o.client()
	if err != nil {
		return err
	}
	ctx := c.Context()
	var rows []backfillRow
	var wf struct {
		StartTime time.Time `json:"startTime"`
	}
	if _, err := cl.json(ctx, "GET", "/workflow", url.Values{"id": {id}}, callTimeout, &wf); err != nil {
		return failed(err)
	}
	if from.Before(wf.StartTime) {
		rows = append(rows, backfillRow{Time: slot.FormatTime(from), Until: slot.FormatTime(wf.StartTime), Action: "skipped",
			Error: fmt.Sprintf("%s up to the workflow's startTime %s: no slots", slot.FormatTime(from), slot.FormatTime(wf.StartTime))})
	}
	end := to.Add(time.Millisecond) // to is inclusive
	var slots []api.Slot
	for start := from; start.Before(end); start = start.Add(scheduler.Window) {
		e := start.Add(scheduler.Window)
		if e.After(end) {
			e = end
		}
		var ws api.WorkflowSlots
		q := url.Values{"id": {id}, "start": {slot.FormatTime(start)}, "end": {slot.FormatTime(e)}}
		if _, err := cl.json(ctx, "GET", "/workflow-slots", q, callTimeout, &ws); err != nil {
			return failed(err)
		}
		slots = append(slots, ws.Slots...)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Time < slots[j].Time })

	var tw *tabwriter.Writer
	show := func(row backfillRow) {
		if tw == nil {
			return
		}
		status := string(row.Status)
		if status == "" {
			status = "-"
		}
		line := fmt.Sprintf("%s\t%s\t%s", row.Time, status, row.Action)
		if row.Error != "" {
			line += " (" + row.Error + ")"
		}
		fmt.Fprintln(tw, line)
		tw.Flush() // show progress of a long backfill
	}
	if !o.json {
		// Each row is flushed as it is known (a long backfill shows its
		// progress); the minimum width keeps the columns aligned across
		// flushes (WAIT_TIMEOUT is the longest status).
		tw = tabwriter.NewWriter(c.OutOrStdout(), len(slot.WaitTimeout)+2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tSTATUS\tACTION")
	}
	for _, r := range rows {
		show(r)
	}
	nFailed := 0
	checkable := true // GET /rerun answers (a server older than it answers 405)
	for _, s := range slots {
		row := backfillRow{Time: s.Time, Status: s.Status}
		t, _ := slot.ParseTime(s.Time)
		switch {
		case s.Status == slot.Ready || s.Status == slot.Running:
			row.Action = "skipped"
			row.Error = "in progress"
		case dryRun && !checkable:
			row.Action = "would rerun"
		default:
			method, did := "POST", "rerun"
			if dryRun {
				method, did = "GET", "would rerun"
			}
			_, err := cl.call(ctx, method, "/rerun", slotQuery(id, t), callTimeout)
			var ae *apiError
			switch {
			case err == nil:
				row.Action = did
			case dryRun && errors.As(err, &ae) && (ae.Code == http.StatusMethodNotAllowed || ae.Code == http.StatusNotImplemented):
				checkable = false
				row.Action = "would rerun"
			case errors.As(err, &ae) && ae.Code == http.StatusBadRequest:
				// Refused for this slot: not final (a stored WAITING slot
				// will run anyway), not due yet, before startTime.
				row.Action, row.Error = "skipped", ae.Msg
			default:
				row.Action, row.Error = "failed", err.Error()
				nFailed++
			}
		}
		rows = append(rows, row)
		show(row)
	}
	if o.json {
		writeJSON(c.OutOrStdout(), rows)
	} else {
		counts := map[string]int{}
		for _, r := range rows {
			counts[r.Action]++
		}
		var parts []string
		for _, a := range []string{"rerun", "would rerun", "skipped", "failed"} {
			if counts[a] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "no slots in the range")
		}
		fmt.Fprintf(c.OutOrStdout(), "%s %s..%s: %s\n", id, slot.FormatTime(from), slot.FormatTime(to), strings.Join(parts, ", "))
	}
	if nFailed > 0 {
		return failed(fmt.Errorf("%d of %d slots could not be rerun", nFailed, len(rows)))
	}
	return nil
}

func newPauseCmd(pause bool) *cobra.Command {
	name, short := "pause", "Pause a workflow: steps skip it until it is unpaused (POST /pause)"
	if !pause {
		name, short = "unpause", "Unpause a workflow (POST /pause?paused=false)"
	}
	var id string
	c := &cobra.Command{
		Use:   name + " --id WORKFLOW",
		Short: short,
		Args:  cobra.NoArgs,
	}
	c.Flags().StringVar(&id, "id", "", "workflow id (required)")
	o := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := requireID(id); err != nil {
			return err
		}
		cl, err := o.client()
		if err != nil {
			return err
		}
		var p api.PauseResult
		q := url.Values{"id": {id}, "paused": {fmt.Sprint(pause)}}
		body, err := cl.json(c.Context(), "POST", "/pause", q, callTimeout, &p)
		if err != nil {
			return failed(err)
		}
		if o.json {
			writeJSONOut(c.OutOrStdout(), body)
			return nil
		}
		state := "running"
		if p.Paused {
			state = "paused"
		}
		fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", p.ID, state)
		return nil
	}
	return c
}

func newStepCmd() *cobra.Command {
	var at, ids string
	c := &cobra.Command{
		Use:   "step [--time TIME] [--ids a,b]",
		Short: "Run one scheduler step now, or at a simulated time (POST /scheduler)",
		Long: `Run one scheduler step, as cron or --autoSchedule does: reload the
workflows directory and advance every workflow (or only --ids). --time
steps at another time than the server's clock, to simulate time. An id of
--ids that names no loaded workflow is an error (exit 1); the others are
stepped.`,
		Args: cobra.NoArgs,
	}
	c.Flags().StringVar(&at, "time", "", "the step's current time (default: the server's clock)")
	c.Flags().StringVar(&ids, "ids", "", "comma-separated workflow ids (default: all)")
	o := addClientFlags(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		q := url.Values{}
		if at != "" {
			t, err := timeFlag("time", at)
			if err != nil {
				return err
			}
			q.Set("time", slot.FormatTime(t))
		}
		if ids != "" {
			q.Set("ids", ids)
		}
		cl, err := o.client()
		if err != nil {
			return err
		}
		var r api.StepResult
		body, err := cl.json(c.Context(), "POST", "/scheduler", q, stepTimeout, &r)
		if err != nil {
			return failed(err)
		}
		if o.json {
			writeJSONOut(c.OutOrStdout(), body)
		} else {
			fmt.Fprintf(c.OutOrStdout(), "stepped at %s\n", r.Time)
			for _, le := range r.LoadErrors {
				fmt.Fprintf(c.ErrOrStderr(), "not loaded: %s: %s\n", le.File, le.Error)
			}
		}
		if len(r.UnknownIDs) > 0 {
			return failed(fmt.Errorf("--ids: no loaded workflow %s: not stepped", strings.Join(r.UnknownIDs, ", ")))
		}
		return nil
	}
	return c
}
