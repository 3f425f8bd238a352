package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/scheduler"
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
RUNNING) and slots the server refuses (a WAITING slot, which runs anyway)
are skipped, each listed with why; the part of the range before the
workflow's startTime is one skipped row. A slot whose stored record the
server cannot read (status UNREADABLE; with --json, an "unreadable" field
giving why) is rerun as any other, which rewrites the record, unless the
server refuses it (a job of the slot still runs: skipped, with why). Slots after the server's clock are
not due yet: the backfill stops at the first slot the server refuses as
not due (every later one is after it) and lists the rest as one skipped
row, without asking about each (the dry run too). A range partly or wholly in the future is
therefore not an error. --dry-run asks the server about each slot (GET
/rerun) and lists what would be rerun and what would be skipped, changing
nothing.

A range is at most 100000 slots and 100000 hours (about 11 years) from
the workflow's startTime; a longer one is refused before anything is rerun
(exit 2): split it. If the server cannot be reached, refuses the token or
no longer knows the workflow, the backfill stops there: the rows so far
and the slots not tried are listed, and the exit status is 1.

Exit status: 0 when every due slot was rerun or skipped with a reason; 1
when a slot failed or the backfill stopped; 2 for bad flags or a range over
the bounds.`,
		Example: `  celos rerun --id wordcount --time 2015-09-13T13:00Z
  celos rerun --id wordcount --from 2015-08-01T00:00Z --to 2015-08-31T23:00Z --dry-run`,
		Args: workflowArg(&id),
	}
	c.Flags().StringVar(&id, "id", "", "workflow id (required; or give it as the argument)")
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
		Use:     "kill --id WORKFLOW --time TIME",
		Short:   "Kill a slot: stop its external job and mark it KILLED (POST /kill)",
		Example: `  celos kill --id wordcount --time 2015-09-13T13:00Z`,
		Args:    workflowArg(&id),
	}
	c.Flags().StringVar(&id, "id", "", "workflow id (required; or give it as the argument)")
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
	fmt.Fprintf(c.OutOrStdout(), "%s@%s: %s\n", id, printable(s.Time), printable(string(s.Status)))
	return nil
}

// Bounds of a backfill, checked before anything is rerun: a range of
// more slots, or longer, is refused (exit 2) and must be split. The span
// bounds the listing requests (7 days each) of a sparse schedule.
const (
	maxBackfillSlots = 100_000
	maxBackfillSpan  = 100_000 * time.Hour // about 11 years
)

// backfillRow is one slot of a range rerun, or one group of slots, as
// --json prints it.
type backfillRow struct {
	Time string `json:"time"`
	// Until, on the row of the part of the range before the workflow's
	// startTime (which has no slots), is that startTime (exclusive).
	Until string `json:"until,omitempty"`
	// Last and Slots, on the row of a group of slots (those not due yet,
	// those not tried after the backfill stopped), are the group's last
	// slot time (inclusive) and how many slots it holds.
	Last   string      `json:"last,omitempty"`
	Slots  int         `json:"slots,omitempty"`
	Status slot.Status `json:"status,omitempty"` // before the rerun
	// Unreadable, on the row of a slot whose stored record the server
	// cannot read (no status), is why; a rerun rewrites the record.
	Unreadable string `json:"unreadable,omitempty"`
	// Action is "rerun", "would rerun" (--dry-run), "skipped", "failed" or
	// "not tried".
	Action string `json:"action"`
	// Error says why a slot was skipped, failed or not tried.
	Error string `json:"error,omitempty"`
}

// slotCount is how many slots a row stands for: none for the part before
// startTime, the group's size for a group, else one.
func (r backfillRow) slotCount() int {
	switch {
	case r.Until != "":
		return 0
	case r.Last != "":
		return r.Slots
	}
	return 1
}

// backfillPlan is what a backfill reruns: every slot of the workflow's
// schedule in [from, to], oldest first.
type backfillPlan struct {
	id       string
	from, to time.Time
	// beforeStart is the row of the part of the range before the
	// workflow's startTime, if the range reaches there.
	beforeStart *backfillRow
	// slots are the slots of the range, those whose record the server
	// cannot read included (with no status).
	slots []api.Slot
	// unreadable is why, by slot time, for those.
	unreadable map[string]string
}

// planBackfill lists the slots of [from, to] with GET /workflow-slots (7
// days per request), from the workflow's startTime on, oldest first. A
// range longer than maxBackfillSpan or holding more than maxBackfillSlots
// slots is a usage error.
func planBackfill(ctx context.Context, cl *client, id string, from, to time.Time) (*backfillPlan, error) {
	var wf struct {
		StartTime time.Time `json:"startTime"`
	}
	if _, err := cl.json(ctx, "GET", "/workflow", url.Values{"id": {id}}, callTimeout, &wf); err != nil {
		return nil, failed(fmt.Errorf("backfill of %s: %w", id, err))
	}
	p := &backfillPlan{id: id, from: from, to: to, unreadable: map[string]string{}}
	start := from
	if from.Before(wf.StartTime) {
		p.beforeStart = &backfillRow{Time: slot.FormatTime(from), Until: slot.FormatTime(wf.StartTime), Action: "skipped",
			Error: fmt.Sprintf("%s up to the workflow's startTime %s: no slots", slot.FormatTime(from), slot.FormatTime(wf.StartTime))}
		start = wf.StartTime
	}
	if span := to.Sub(start); span > maxBackfillSpan {
		return nil, usageError("--from %s --to %s: %s spans %.0f hours from %s; a backfill is at most %.0f hours (about 11 years): split the range",
			slot.FormatTime(from), slot.FormatTime(to), id, span.Hours(), slot.FormatTime(start), maxBackfillSpan.Hours())
	}
	end := to.Add(time.Millisecond) // to is inclusive
	for s := start; s.Before(end); s = s.Add(scheduler.Window) {
		e := s.Add(scheduler.Window)
		if e.After(end) {
			e = end
		}
		var ws api.WorkflowSlots
		q := url.Values{"id": {id}, "start": {slot.FormatTime(s)}, "end": {slot.FormatTime(e)}}
		if _, err := cl.json(ctx, "GET", "/workflow-slots", q, callTimeout, &ws); err != nil {
			return nil, failed(fmt.Errorf("backfill of %s: list the slots: %w", id, err))
		}
		p.slots = append(p.slots, ws.Slots...)
		// A slot whose record cannot be read is rerun as any other: the
		// rerun rewrites it.
		for _, u := range ws.Unreadable {
			p.slots = append(p.slots, api.Slot{Time: u.Time})
			p.unreadable[u.Time] = u.Error
		}
		if len(p.slots) > maxBackfillSlots {
			return nil, usageError("--from %s --to %s: %s has more than %d slots in the range (%d up to %s); a backfill is at most %d slots: split the range",
				slot.FormatTime(from), slot.FormatTime(to), id, maxBackfillSlots, len(p.slots), slot.FormatTime(e), maxBackfillSlots)
		}
	}
	sort.Slice(p.slots, func(i, j int) bool { return p.slots[i].Time < p.slots[j].Time })
	return p, nil
}

// verdict is what the server's answer about one slot means for the rest
// of a backfill.
type verdict int

const (
	goOn    verdict = iota // done, skipped or failed: next slot
	notDue                 // refused as not due yet: so is every later slot
	stopRun                // the server cannot be reached or refuses the workflow: stop
)

// notDueRE finds the server's time in the message of a server of the
// previous version, whose error answers had no code: "... is not due yet
// (the server's time is T); it runs at its time" (scheduler/engine). It is
// only a fallback (notDueAt): a server that answers a code is believed,
// whatever its wording. TestRerunRangeOldServer pins it.
var notDueRE = regexp.MustCompile(`is not due yet \(the server's time is ([^)\s]+)\)`)

// notDueAt reports whether a refusal of a rerun says the slot is not due
// yet, and the server's time it gives: code not_due and serverTime; from a
// server without codes, the message (notDueRE).
func notDueAt(ae *apiError) (serverTime string, ok bool) {
	if ae.Kind != "" {
		return ae.ServerTime, ae.Kind == "not_due"
	}
	if m := notDueRE.FindStringSubmatch(ae.Msg); m != nil {
		return m[1], true
	}
	return "", false
}

// backfillRun sends the slots of a plan and keeps the rows, printing each
// as it is known.
type backfillRun struct {
	cl     *client
	plan   *backfillPlan
	dryRun bool
	// checkable: the server answers GET /rerun (a server older than it
	// answers 405, and the dry run then lists every slot as would rerun).
	checkable bool
	rows      []backfillRow
	tw        *tabwriter.Writer // nil with --json
	// stopped says why the run stopped before the end of the plan.
	stopped error
}

func newBackfillRun(cl *client, p *backfillPlan, dryRun bool, out io.Writer, asJSON bool) *backfillRun {
	r := &backfillRun{cl: cl, plan: p, dryRun: dryRun, checkable: true}
	if !asJSON {
		// Each row is flushed as it is known (a long backfill shows its
		// progress); the minimum width keeps the columns aligned across
		// flushes (WAIT_TIMEOUT is the longest status).
		r.tw = tabwriter.NewWriter(out, len(slot.WaitTimeout)+2, 4, 2, ' ', 0)
		fmt.Fprintln(r.tw, "TIME\tSTATUS\tACTION")
	}
	return r
}

// add keeps a row and prints it (a table row, flushed at once).
func (r *backfillRun) add(row backfillRow) {
	r.rows = append(r.rows, row)
	if r.tw == nil {
		return
	}
	status := string(row.Status)
	switch {
	case row.Unreadable != "":
		status = unreadableStatus
	case status == "":
		status = "-"
	}
	action := row.Action
	switch {
	case row.Last != "" && row.Last != row.Time:
		action += fmt.Sprintf(" %d slots through %s: %s", row.Slots, row.Last, row.Error)
	case row.Last != "":
		action += ": " + row.Error
	case row.Error != "":
		action += " (" + row.Error + ")"
	}
	fmt.Fprintf(r.tw, "%s\t%s\t%s\n", printable(row.Time), printable(status), printable(action))
	r.tw.Flush()
}

// addGroup adds one row for the slots rest (not empty): its first slot,
// how many and the last one.
func (r *backfillRun) addGroup(rest []api.Slot, action, why string) {
	r.add(backfillRow{Time: rest[0].Time, Status: rest[0].Status, Unreadable: r.plan.unreadable[rest[0].Time],
		Last: rest[len(rest)-1].Time, Slots: len(rest), Action: action, Error: why})
}

// sendAll reruns (or, dry, checks) the plan's slots oldest first. It stops
// at the first slot refused as not due yet (every later slot is after the
// server's clock too: one row for all) and at the first answer that
// concerns the whole run (an unreachable server, a refused token, an
// unknown workflow: the rest is one row, not tried).
func (r *backfillRun) sendAll(ctx context.Context) {
	if r.plan.beforeStart != nil {
		r.add(*r.plan.beforeStart)
	}
	slots := r.plan.slots
	for i, s := range slots {
		row, v := r.send(ctx, s)
		switch v {
		case notDue:
			r.addGroup(slots[i:], "skipped", row.Error)
			return
		case stopRun:
			r.add(row)
			r.stopped = fmt.Errorf("stopped at %s: %s", s.Time, row.Error)
			if rest := slots[i+1:]; len(rest) > 0 {
				r.addGroup(rest, "not tried", "the backfill stopped at "+s.Time)
			}
			return
		}
		r.add(row)
	}
}

// send reruns one slot (POST /rerun; GET /rerun when dry) and says what
// the answer means for the run.
func (r *backfillRun) send(ctx context.Context, s api.Slot) (backfillRow, verdict) {
	row := backfillRow{Time: s.Time, Status: s.Status, Unreadable: r.plan.unreadable[s.Time]}
	if s.Status == slot.Ready || s.Status == slot.Running {
		row.Action, row.Error = "skipped", "in progress"
		return row, goOn
	}
	if r.dryRun && !r.checkable {
		row.Action = "would rerun"
		return row, goOn
	}
	method, did := "POST", "rerun"
	if r.dryRun {
		method, did = "GET", "would rerun"
	}
	t, err := slot.ParseTime(s.Time)
	if err != nil {
		row.Action, row.Error = "failed", fmt.Sprintf("the server listed a bad slot time: %v", err)
		return row, goOn
	}
	_, err = r.cl.call(ctx, method, "/rerun", slotQuery(r.plan.id, t), callTimeout)
	var ae *apiError
	switch {
	case err == nil:
		row.Action = did
		return row, goOn
	case !errors.As(err, &ae):
		// Not an answer: the server cannot be reached (or the command
		// was interrupted); later slots would fail the same way.
		row.Action, row.Error = "failed", err.Error()
		return row, stopRun
	case r.dryRun && (ae.Code == http.StatusMethodNotAllowed || ae.Code == http.StatusNotImplemented):
		r.checkable = false
		row.Action = "would rerun"
		return row, goOn
	case ae.Code == http.StatusBadRequest:
		// Refused for this slot: not final (a stored WAITING slot will
		// run anyway), not due yet, before startTime.
		row.Action, row.Error = "skipped", ae.Msg
		if at, ok := notDueAt(ae); ok {
			row.Error = "not due yet"
			if at != "" {
				row.Error = fmt.Sprintf("not due yet (the server's time is %s)", at)
			}
			return row, notDue
		}
		return row, goOn
	case ae.Code == http.StatusUnauthorized, ae.Code == http.StatusForbidden, ae.Code == http.StatusNotFound,
		ae.Code == http.StatusConflict, ae.Code == http.StatusMisdirectedRequest:
		// About the whole run: the token, the workflow (gone, or its
		// schedule changed or does not resolve), the server's Host rule.
		row.Action, row.Error = "failed", err.Error()
		return row, stopRun
	}
	row.Action, row.Error = "failed", err.Error()
	return row, goOn
}

// finish prints the rows (--json) or the summary line, and returns the
// command's error: exit 1 if a slot failed or the run stopped, else nil
// (skipped slots, those not due yet included, are not an error).
func (r *backfillRun) finish(out io.Writer) error {
	counts := map[string]int{}
	total := 0
	for _, row := range r.rows {
		counts[row.Action] += row.slotCount()
		total += row.slotCount()
	}
	var parts []string
	for _, a := range []string{"rerun", "would rerun", "skipped", "failed", "not tried"} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no slots in the range")
	}
	summary := strings.Join(parts, ", ")
	if r.tw == nil {
		var b bytes.Buffer
		writeJSON(&b, r.rows)
		writeJSONOut(out, b.Bytes())
	} else {
		fmt.Fprintf(out, "%s %s..%s: %s\n", r.plan.id, slot.FormatTime(r.plan.from), slot.FormatTime(r.plan.to), summary)
	}
	switch {
	case r.stopped != nil:
		return failed(fmt.Errorf("backfill of %s %v (%s)", r.plan.id, r.stopped, summary))
	case counts["failed"] > 0:
		return failed(fmt.Errorf("backfill of %s: %d of %d slots could not be rerun", r.plan.id, counts["failed"], total))
	}
	return nil
}

// backfill reruns every slot of [from, to] (celos rerun --from --to): it
// plans the slots, sends them oldest first (with dryRun it asks GET
// /rerun, which answers as POST would without changing anything) and
// prints a row per slot and a summary.
func backfill(c *cobra.Command, o *clientOpts, id string, from, to time.Time, dryRun bool) error {
	cl, err := o.client()
	if err != nil {
		return err
	}
	p, err := planBackfill(c.Context(), cl, id, from, to)
	if err != nil {
		return err
	}
	r := newBackfillRun(cl, p, dryRun, c.OutOrStdout(), o.json)
	r.sendAll(c.Context())
	return r.finish(c.OutOrStdout())
}

func newPauseCmd(pause bool) *cobra.Command {
	name, short := "pause", "Pause a workflow: steps skip it until it is unpaused (POST /pause)"
	if !pause {
		name, short = "unpause", "Unpause a workflow (POST /pause?paused=false)"
	}
	var id string
	c := &cobra.Command{
		Use:     name + " --id WORKFLOW",
		Short:   short,
		Example: "  celos " + name + " --id wordcount\n  celos " + name + " --id wordcount --server http://celos.example.com:8080",
		Args:    workflowArg(&id),
	}
	c.Flags().StringVar(&id, "id", "", "workflow id (required; or give it as the argument)")
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
		fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", printable(p.ID), state)
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
		Example: `  celos step
  celos step --ids wordcount-nyc,wordcount-lax
  celos step --time 2015-09-13T14:05Z   # as if it were 14:05`,
		Args: noArgs,
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
			fmt.Fprintf(c.OutOrStdout(), "stepped at %s\n", printable(r.Time))
			for _, le := range r.LoadErrors {
				fmt.Fprintf(c.ErrOrStderr(), "not loaded: %s: %s\n", printable(le.File), printable(le.Error))
			}
		}
		if len(r.UnknownIDs) > 0 {
			return failed(fmt.Errorf("--ids: no loaded workflow %s: not stepped", printable(strings.Join(r.UnknownIDs, ", "))))
		}
		return nil
	}
	return c
}
