package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
)

func init() { register(newDBCmd) }

func newDBCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "db",
		Short: "Maintain the state database (prune old slot files)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return usageError("celos db needs a subcommand: prune")
		},
	}
	c.AddCommand(newDBPruneCmd())
	return c
}

func newDBPruneCmd() *cobra.Command {
	var (
		dir, olderThan, nowS string
		dryRun               bool
	)
	c := &cobra.Command{
		Use:   "prune --db DIR --older-than DURATION",
		Short: "Delete the files of final slots older than a retention period",
		Long: `prune deletes, from the state database in --db, the files of final slots
(SUCCESS, FAILURE, WAIT_TIMEOUT, KILLED) whose slot time is more than
--older-than before now, the submit intents that old, and rerun markers
that expired (14 days) on final slots; day directories left empty are
removed. Slots that are not final (WAITING, READY, RUNNING) are kept
whatever their age, and so are paused flags and registers.

--older-than is a duration: 30d, 2w, 720h (d is 24 hours, w 7 days); it
must be at least 8 days (the scheduler's 7-day window and a day), so that
a pruned slot can never be stepped again. The UI and the API show at most
the last 7 days, so older files only matter to someone reading them by
hand or to a rerun of an old slot (which recreates it).

The database must not be in use: prune takes its lock, and fails naming
the server's process if one holds it (stop the server, prune, start it:
prune is quick). Run it from cron, e.g. weekly.`,
		Example: `  celos db prune --db /var/lib/celos/db --older-than 30d
  celos db prune --db /var/lib/celos/db --older-than 90d --dry-run`,
		Args: cobra.NoArgs,
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
				return usageError("--older-than %s: must be at least %v (the 7-day window and a day)", olderThan, statedb.MinRetention)
			}
			now := time.Now().UTC()
			if nowS != "" {
				if now, err = slot.ParseTime(nowS); err != nil {
					return usageError("--now: %v", err)
				}
			}
			before := now.Add(-keep)
			files0, bytes0 := dirUsage(dir)
			db, err := statedb.Open(dir)
			if err != nil {
				if errors.Is(err, statedb.ErrLocked) {
					err = fmt.Errorf("%w; stop the server first", err)
				}
				return &ExitError{Code: ExitFailure, Err: err}
			}
			defer db.Close()
			out := c.OutOrStdout()
			if dryRun {
				n, err := countPrunable(db, before)
				if err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				fmt.Fprintf(out, "would delete %d slot files older than %s (of %d files, %s in %s)\n",
					n, slot.FormatTime(before), files0, humanBytes(bytes0), dir)
				return nil
			}
			start := time.Now()
			n, err := db.Prune(before, now)
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("prune %s: %w (deleted %d slot files before the error)", dir, err, n)}
			}
			files1, bytes1 := dirUsage(dir)
			fmt.Fprintf(out, "deleted %d slot files older than %s in %v: %d files, %s → %d files, %s\n",
				n, slot.FormatTime(before), time.Since(start).Round(time.Millisecond), files0, humanBytes(bytes0), files1, humanBytes(bytes1))
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "db", "", "state database directory (as celos server --db)")
	f.StringVar(&olderThan, "older-than", "", "retention: delete final slots older than this (30d, 2w, 720h; at least 8d)")
	f.BoolVar(&dryRun, "dry-run", false, "only count the slot files that would be deleted")
	f.StringVar(&nowS, "now", "", "the current time (default: the clock), for tests and simulated time")
	return c
}

// parseRetention reads a duration with d (24 h) and w (7 d) units besides
// Go's (h, m, s): 30d, 2w, 36h, 1w2d.
func parseRetention(s string) (time.Duration, error) {
	var total time.Duration
	rest := strings.TrimSpace(s)
	for rest != "" {
		i := strings.IndexAny(rest, "dw")
		if i < 0 {
			d, err := time.ParseDuration(rest)
			if err != nil {
				return 0, errors.New("want a duration such as 30d, 2w or 720h")
			}
			total += d
			break
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n < 0 || n > 100000 {
			return 0, errors.New("want a duration such as 30d, 2w or 720h")
		}
		unit := 24 * time.Hour
		if rest[i] == 'w' {
			unit *= 7
		}
		total += time.Duration(n) * unit
		rest = rest[i+1:]
	}
	if total <= 0 {
		return 0, errors.New("want a positive duration such as 30d")
	}
	return total, nil
}

// countPrunable counts the final slots older than before.
func countPrunable(db *statedb.DB, before time.Time) (int, error) {
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
