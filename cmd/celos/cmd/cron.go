package cmd

import (
	"bufio"
	"fmt"
	"io"
	"time"
	_ "time/tzdata" // --tz and cron time zones work on machines without a zoneinfo database

	"github.com/celos-go/celos/scheduler"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/cron"
)

func init() { register(newCronCmd) }

// defaultCronLimit caps what `celos cron` prints unless --limit says otherwise.
const defaultCronLimit = 10000

func newCronCmd() *cobra.Command {
	var fromS, toS, tz string
	var limit int
	c := &cobra.Command{
		Use:   "cron EXPR",
		Short: "Print the slot times of a Quartz cron expression",
		Long: `cron prints the fire times of a Quartz cron expression in [--from, --to),
one RFC 3339 UTC instant per line, computed by the same code the scheduler
uses to make slots.

EXPR has 6 or 7 fields (quote it):
  seconds minutes hours day-of-month month day-of-week [year]
with * ? , - / and L W LW # nL, month names JAN-DEC and day names SUN-SAT;
day-of-week 1 is Sunday; exactly one of day-of-month and day-of-week is ?.

Wall-clock times are read in --tz (an IANA zone, default UTC). A time
skipped by a spring-forward change fires once, shifted forward by the gap;
a time that occurs twice at a fall-back change fires once, at its first
occurrence. Exception: when the hour field matches every hour (*, 0-23;
hourly, minutely and finer schedules), the expression fires in every real
hour, the repeated one included (never twice in one real hour), so an
hourly schedule loses no hour; listed hours (*/2, 1,13) follow the
first-occurrence rule.

Each line is the UTC instant (what the scheduler's slots are named by);
with a --tz other than UTC it is followed by the wall time in --tz, with
its offset and abbreviation:
  2024-03-10T07:30:00Z  2024-03-10T03:30:00-04:00 EDT

--from and --to take RFC 3339 times (2015-09-13T13:40:00Z, with an offset,
or without seconds: 2015-09-13T13:40Z), or a date (2015-09-13: midnight in
--tz). --from defaults to now, --to to seven days after --from (the
scheduler's window). A --from with a fraction of a second is rounded up to
the next whole second.

At most --limit times are printed (default 10000; 0 for no limit); when
more follow, a note on stderr says so.

Exit status: 0 printed (possibly nothing: an impossible date such as
31 February never fires), 1 the expression is invalid, 2 usage error
(bad flag, time or zone).`,
		Example: `  # hourly, for one day
  celos cron '0 0 * * * ?' --from 2024-01-01T00:00Z --to 2024-01-02T00:00Z

  # 29 February: only leap years
  celos cron '0 0 0 29 2 ?' --from 2023-01-01T00:00Z --to 2030-01-01T00:00Z

  # 02:30 every day in New York, across the spring-forward change
  celos cron '0 30 2 * * ?' --tz America/New_York --from 2024-03-09 --to 2024-03-12

  # the third Friday of each month in 2025
  celos cron '0 0 9 ? * FRI#3 2025' --from 2025-01-01T00:00Z --to 2026-01-01T00:00Z`,
		Args: cronArgs,
		RunE: func(c *cobra.Command, args []string) error {
			loc := time.UTC
			if tz != "" && tz != "UTC" {
				l, err := time.LoadLocation(tz)
				if err != nil || tz == "Local" {
					return usageError("--tz: unknown time zone %q (want an IANA name such as Europe/London)", tz)
				}
				loc = l
			}
			from := time.Now().UTC()
			if fromS != "" {
				t, err := parseCronTime(fromS, loc)
				if err != nil {
					return usageError("--from: %v", err)
				}
				from = t
			}
			to := from.Add(scheduler.Window)
			if toS != "" {
				t, err := parseCronTime(toS, loc)
				if err != nil {
					return usageError("--to: %v", err)
				}
				to = t
			}
			if to.Before(from) {
				return usageError("--to %s is before --from %s", to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
			}
			if limit < 0 {
				return usageError("--limit %d must not be negative (0 for no limit)", limit)
			}
			e, err := cron.Parse(args[0], loc)
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("cron %q: %w", args[0], err)}
			}
			n := -1
			if limit > 0 {
				n = limit + 1 // one more tells whether there are more
			}
			times := e.AppendBetweenLimit(nil, from, to, n)
			more := limit > 0 && len(times) > limit
			if more {
				times = times[:limit]
			}
			if err := writeCronTimes(c.OutOrStdout(), times, loc); err != nil {
				return err
			}
			if more {
				fmt.Fprintf(c.ErrOrStderr(), "celos: stopped after %d times (--limit); more follow before %s\n", limit, to.Format(time.RFC3339))
			}
			return nil
		},
	}
	c.Flags().StringVar(&fromS, "from", "", "start of the window, inclusive (RFC 3339, or a date: midnight in --tz; default now)")
	c.Flags().StringVar(&toS, "to", "", "end of the window, exclusive (RFC 3339, or a date: midnight in --tz; default --from + 7 days)")
	c.Flags().StringVar(&tz, "tz", "UTC", "IANA time zone whose wall clock the expression reads")
	c.Flags().IntVar(&limit, "limit", defaultCronLimit, "print at most this many times (0: no limit)")
	return c
}

// parseCronTime reads --from or --to: an RFC 3339 time as slot.ParseTime
// reads it, or a date alone (2024-03-10), which is midnight in loc.
func parseCronTime(s string, loc *time.Location) (time.Time, error) {
	if len(s) == len("2006-01-02") {
		if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
			return t.UTC(), nil
		}
	}
	t, err := slot.ParseTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%v, or a date such as 2015-09-13 (midnight in --tz)", err)
	}
	return t, nil
}

// writeCronTimes prints one time a line: the UTC instant and, for a zone
// other than UTC, the wall time in loc that the expression was read in.
func writeCronTimes(out io.Writer, times []time.Time, loc *time.Location) error {
	w := bufio.NewWriter(out)
	for _, t := range times {
		w.WriteString(t.Format(time.RFC3339))
		if loc != time.UTC {
			w.WriteString("  ")
			w.WriteString(t.In(loc).Format("2006-01-02T15:04:05-07:00 MST"))
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write slot times: %w", err)
	}
	return nil
}

// cronArgs wants one argument, the expression; several are most often an
// expression the shell split (and whose * it expanded to file names).
func cronArgs(c *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return argsError(c, "cron needs a cron EXPR, quoted: celos cron '0 0 * * * ?'")
	case len(args) > 1:
		return argsError(c, "cron takes one EXPR, got %d arguments: quote it, as in celos cron '0 0 * * * ?' (unquoted, the shell splits it at spaces and expands *)", len(args))
	}
	return nil
}
