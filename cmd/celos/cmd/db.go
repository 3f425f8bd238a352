package cmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/internal/humandur"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

func init() { register(newDBCmd) }

func newDBCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "db",
		Short: "Maintain the state database (prune old slot files; migrate to and export from PostgreSQL)",
		Example: `  celos db prune --db /var/lib/celos/db --older-than 30d --workflows-dir /etc/celos/workflows
  celos db migrate --from /var/lib/celos/db --to postgres://celos@db1/celos
  celos db export --from postgres://celos@db1/celos --to /var/lib/celos/db-back`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return usageError("celos db needs a subcommand: prune, migrate or export")
		},
	}
	c.AddCommand(newDBPruneCmd(), newDBMigrateCmd(), newDBExportCmd())
	return c
}

func newDBPruneCmd() *cobra.Command {
	var (
		dir, olderThan, nowS, wfDir string
		dryRun, ignoreTriggers      bool
	)
	c := &cobra.Command{
		Use:   "prune --db DIR --older-than DURATION --workflows-dir DIR",
		Short: "Delete the files of final slots older than a retention period",
		Long: `prune deletes, from the state database in --db, the files of final slots
(SUCCESS, FAILURE, WAIT_TIMEOUT, KILLED) whose slot time is more than
--older-than before now, the submit intents that old, and rerun markers
that expired (14 days) on final slots, and the submissions recorded for
run constraints (run/<workflow>) made that long ago; day directories and
records of submissions left empty are removed. --dry-run counts the slot
files and the recorded submissions it would delete, deleting nothing. Slots that are not final (WAITING, READY, RUNNING) are kept
whatever their age, and so are paused flags and registers.

--older-than is a duration: 30d, 2w, 720h (d is 24 hours, w 7 days); it
must be at least 8 days (the scheduler's 7-day window and a day), so that
a pruned slot can never be stepped again. The UI and the API show at most
the last 7 days, so older files only matter to someone reading them by
hand, to a rerun of an old slot (which recreates it), and to triggers
that look back: a workflow whose trigger is, say, an offset of -10 days
around a success trigger on workflow a reads a's slots 10 days before its
own, so a's must be kept 8 + 10 = 18 days.

--workflows-dir is the server's --workflows directory: prune reads its
workflows, computes how far back each trigger reads which workflow's
slots, and refuses (deleting nothing) a retention that would delete a
slot state a trigger still reads, naming the workflows and the retention
needed. It refuses the same way a retention shorter than the period a
workflow's run constraints count (minInterval, maxRuns' periodSeconds):
the submissions recorded in that period must stay, or the workflow would
run early. Without --workflows-dir it cannot know and refuses; pass
--ignore-triggers instead to prune without the check (only when no
trigger looks back further than --older-than minus 8 days). A workflows
file that does not load is refused too: its triggers are unknown.

The database must not be in use: prune takes its lock, and fails naming
the server's process if one holds it (stop the server, prune, start it:
prune is quick). Run it from cron, e.g. weekly. A --db directory that does
not exist or holds no state (a typo) is refused, not created.

--db may also be a PostgreSQL database (postgres://... or host=... dbname=...,
as celos server --db): the same rules, counted in slot states; it may run
while servers use the database (one transaction per workflow).`,
		Example: `  celos db prune --db /var/lib/celos/db --older-than 30d --workflows-dir /etc/celos/workflows
  celos db prune --db postgres://celos@db1/celos --older-than 30d --workflows-dir /etc/celos/workflows
  celos db prune --db /var/lib/celos/db --older-than 90d --workflows-dir /etc/celos/workflows --dry-run`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError("--db is required")
			}
			if olderThan == "" {
				return usageError("--older-than is required (e.g. 30d)")
			}
			keep, err := parseRetention(olderThan)
			if err != nil {
				return usageError("--older-than %q: %v", olderThan, err)
			}
			if keep < statedb.MinRetention {
				return usageError("--older-than %s: must be at least %s (the 7-day window and a day)", olderThan, humandur.Format(statedb.MinRetention))
			}
			if wfDir == "" && !ignoreTriggers {
				return usageError("celos db prune needs --workflows-dir DIR (the server's --workflows) to keep the slot states that triggers looking back still read; --ignore-triggers prunes without that check")
			}
			if wfDir != "" && ignoreTriggers {
				return usageError("give --workflows-dir or --ignore-triggers, not both")
			}
			now := time.Now().UTC()
			if nowS != "" {
				if now, err = slot.ParseTime(nowS); err != nil {
					return usageError("--now: %v", err)
				}
			}
			before := now.Add(-keep)
			a := pruneArgs{db: dir, wfDir: wfDir, olderThan: olderThan, keep: keep, before: before, now: now, dryRun: dryRun}
			if statepg.IsDSN(dir) {
				return prunePostgres(c.OutOrStdout(), a)
			}
			return pruneFiles(c.OutOrStdout(), a)
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "db", "", "state database directory, or PostgreSQL URL or connection string (as celos server --db)")
	f.StringVar(&olderThan, "older-than", "", "retention: delete final slots older than this (30d, 2w, 720h; at least 8d)")
	f.BoolVar(&dryRun, "dry-run", false, "only count the slot files and the recorded submissions that would be deleted")
	f.StringVar(&wfDir, "workflows-dir", "", "the server's workflows directory: refuse a retention that would delete what a trigger still reads")
	f.BoolVar(&ignoreTriggers, "ignore-triggers", false, "prune without --workflows-dir (no check of what triggers read)")
	f.StringVar(&nowS, "now", "", "the current time (default: the clock), for tests and simulated time")
	return c
}

// pruneFiles is celos db prune on a state directory (a.db): it must hold
// state, and no server may hold its lock.
func pruneFiles(out io.Writer, a pruneArgs) error {
	if !holdsState(a.db) {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("state directory %s (--db) does not exist or holds no state (none of %s): nothing deleted", a.db, strings.Join(stateAreas, "/, ")+"/")}
	}
	usage := func() string {
		files, bytes := dirUsage(a.db)
		return fmt.Sprintf("%d files, %s", files, humanBytes(bytes))
	}
	size0 := usage()
	db, err := statedb.Open(a.db)
	if err != nil {
		if errors.Is(err, statedb.ErrLocked) {
			err = fmt.Errorf("%w; stop the server first", err)
		}
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer db.Close()
	return prune(out, a, pruneTarget{db: db, unit: "slot files", where: "in " + a.db, size0: size0, size: usage})
}

// prunable is a store celos db prune works on (statedb.DB, statepg.DB).
type prunable interface {
	engine.Store
	Workflows() ([]string, error)
	AllWorkflows() ([]string, error)
	Range(wf string, start, end time.Time) ([]slot.State, error)
	Runs(wf string) ([]store.Run, error)
	Prune(before, now time.Time) (int, error)
}

// pruneTarget is an open store to prune and how the output names it.
type pruneTarget struct {
	db    prunable
	unit  string        // what Prune counts: "slot files", "slot states"
	where string        // "in DIR", "from postgres://…"
	size0 string        // the store's size before, "" if not measured
	size  func() string // the store's size now; nil if not measured
}

// prune is celos db prune on an open store: it checks the retention
// against what the triggers of a.wfDir read, then counts (--dry-run) or
// deletes the final slots older than a.before and the submissions
// recorded before it.
func prune(out io.Writer, a pruneArgs, t pruneTarget) error {
	if a.wfDir != "" {
		if err := checkLookBacks(t.db, a.wfDir, a.olderThan, a.keep); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
	}
	runs, err := countRuns(t.db, a.before)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	limit := slot.FormatTime(a.before)
	if a.dryRun {
		n, err := countPrunable(t.db, a.before)
		if err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		size := ""
		if t.size0 != "" {
			size = " (of " + t.size0 + ")"
		}
		fmt.Fprintf(out, "would delete %d %s older than %s and %d of %d recorded submissions made before it %s%s\n",
			n, t.unit, limit, runs.old, runs.all, t.where, size)
		if u := runs.unreadable; len(u) > 0 {
			more := ""
			if len(u) > 5 {
				u, more = u[:5], fmt.Sprintf(" and %d more", len(u)-5)
			}
			fmt.Fprintf(out, "the records of submissions of %s%s cannot be read: not counted (the prune reports them)\n",
				strings.Join(u, ", "), more)
		}
		return nil
	}
	start := time.Now()
	n, err := t.db.Prune(a.before, a.now)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("prune %s: %w (deleted %d %s before the error)", a.db, err, n, t.unit)}
	}
	took := time.Since(start).Round(time.Millisecond).String()
	// Servers (PostgreSQL) only add submissions newer than the limit:
	// the difference is what the prune deleted.
	left, err := countRuns(t.db, a.before)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("prune %s: deleted %d %s, then: %w", a.db, n, t.unit, err)}
	}
	if t.size != nil {
		took = t.size0 + " → " + t.size() + "; " + took
	}
	fmt.Fprintf(out, "deleted %d %s older than %s and %d recorded submissions made before it %s (%s)\n",
		n, t.unit, limit, runs.old-left.old, t.where, took)
	return nil
}

// runCount is how many submissions are recorded (all) and how many of
// them were made before a prune's limit (old); unreadable names the
// records of submissions that could not be read (file store), which the
// prune reports itself.
type runCount struct {
	old, all   int
	unreadable []string
}

// countRuns counts the submissions recorded in db, and those made before
// before (which a prune deletes): in one query if the store can
// (statepg), else record by record.
func countRuns(db prunable, before time.Time) (runCount, error) {
	var c runCount
	if rc, ok := db.(interface {
		CountRuns(before time.Time) (old, all int, err error)
	}); ok {
		var err error
		c.old, c.all, err = rc.CountRuns(before)
		return c, err
	}
	wfs, err := db.AllWorkflows()
	if err != nil {
		return c, err
	}
	for _, wf := range wfs {
		runs, err := db.Runs(wf)
		if err != nil {
			c.unreadable = append(c.unreadable, wf)
			continue
		}
		c.all += len(runs)
		for _, r := range runs {
			if r.At.Before(before) {
				c.old++
			}
		}
	}
	return c, nil
}

// parseRetention reads a positive duration as a person writes it: 30d,
// 2w, 36h, 1w2d (humandur).
func parseRetention(s string) (time.Duration, error) {
	d, err := humandur.Parse(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, errors.New("want a positive duration such as 30d")
	}
	return d, nil
}

// checkLookBacks loads the workflows in wfDir as the server does and
// refuses a retention keep (given as olderThan) that would delete a slot
// state a trigger reads before its slot (trigger.LookBacks: every
// workflow read needs statedb.MinRetention plus its look-back), or a
// submission a workflow's run constraints still count (minInterval,
// maxRuns: Constraints.RunLookBack). A workflows file that does not load
// is refused: its triggers are unknown.
func checkLookBacks(db engine.Store, wfDir, olderThan string, keep time.Duration) error {
	if fi, err := os.Stat(wfDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("workflows directory %s (--workflows-dir): must exist and be a directory", wfDir)
	}
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("workflows directory %s: %w", wfDir, err)
	}
	if les := eng.LoadErrors(); len(les) > 0 {
		var b strings.Builder
		for _, le := range les {
			fmt.Fprintf(&b, "\n  workflows file %s did not load: %s", le.File, le.Error)
		}
		return fmt.Errorf("nothing deleted: the triggers of %s cannot all be read, so what they read cannot be kept:%s", wfDir, b.String())
	}
	var ws []*workflow.Workflow
	for _, id := range eng.WorkflowIDs() {
		if w, err := eng.Workflow(id); err == nil {
			ws = append(ws, w)
		}
	}
	var short []string
	longest := keep
	for _, lb := range trigger.LookBacks(ws) {
		need := lb.Retention(statedb.MinRetention)
		if need <= keep {
			continue
		}
		longest = max(longest, need)
		short = append(short, fmt.Sprintf("workflow %s: read %s before their slots by workflow %s: keep at least %s",
			lb.Workflow, humandur.Format(lb.Back), lb.By, humandur.Format(need)))
	}
	var counted []string
	for _, w := range ws {
		need := w.Constraints.RunLookBack()
		if need <= keep {
			continue
		}
		longest = max(longest, need)
		counted = append(counted, fmt.Sprintf("workflow %s: its run constraints (minInterval, maxRuns) count its submissions of the last %s: keep at least %s",
			w.ID, humandur.Format(need), humandur.Format(need)))
	}
	if len(short) == 0 && len(counted) == 0 {
		return nil
	}
	var why []string
	if len(short) > 0 {
		why = append(why, "it would delete slot states that triggers still read (the 7-day window and a day, plus how far back they read):\n  "+strings.Join(short, "\n  "))
	}
	if len(counted) > 0 {
		why = append(why, "it would delete submissions that run constraints still count (the workflow would run early):\n  "+strings.Join(counted, "\n  "))
	}
	return fmt.Errorf("--older-than %s is too short: %s\nnothing deleted; use --older-than %s or more",
		olderThan, strings.Join(why, "\n"), humandur.Format(longest))
}

// countPrunable counts the final slots older than before.
func countPrunable(db prunable, before time.Time) (int, error) {
	wfs, err := db.Workflows()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, wf := range wfs {
		sts, err := db.Range(wf, time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), before)
		if err != nil {
			return n, err
		}
		for _, st := range sts {
			if st.Status.Final() {
				n++
			}
		}
	}
	return n, nil
}

// dirUsage counts the files under dir and their bytes.
func dirUsage(dir string) (files int, bytes int64) {
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			files++
			bytes += fi.Size()
		}
		return nil
	})
	return files, bytes
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
