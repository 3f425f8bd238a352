package cron_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed

	"github.com/celos-go/celos/schema/cron"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load zone %s: %v", name, err)
	}
	return loc
}

func ts(t testing.TB, s string) time.Time {
	t.Helper()
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if v, err := time.Parse(layout, s); err == nil {
			return v
		}
	}
	t.Fatalf("bad time %q in test", s)
	return time.Time{}
}

func format(times []time.Time) string {
	var b strings.Builder
	for i, v := range times {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(v.Format(time.RFC3339))
	}
	return b.String()
}

func TestBetween(t *testing.T) {
	tests := []struct {
		name, expr, zone, from, to string
		want                       string // RFC 3339 instants separated by spaces
	}{
		// Plain fields, steps, ranges and lists.
		{"every 15 s", "*/15 * * * * ?", "", "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z",
			"2024-01-01T00:00:00Z 2024-01-01T00:00:15Z 2024-01-01T00:00:30Z 2024-01-01T00:00:45Z"},
		{"start/step", "5/20 * * * * ?", "", "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z",
			"2024-01-01T00:00:05Z 2024-01-01T00:00:25Z 2024-01-01T00:00:45Z"},
		{"slash alone is star slash", "0 /30 0 * * ?", "", "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z",
			"2024-01-01T00:00:00Z 2024-01-01T00:30:00Z"},
		{"range with step", "0 10-30/10 0 * * ?", "", "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z",
			"2024-01-01T00:10:00Z 2024-01-01T00:20:00Z 2024-01-01T00:30:00Z"},
		{"wrapping minute range with step", "0 50-10/10 0 * * ?", "", "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z",
			"2024-01-01T00:00:00Z 2024-01-01T00:10:00Z 2024-01-01T00:50:00Z"},
		{"wrapping hour range", "0 0 22-1 * * ?", "", "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z",
			"2024-01-01T00:00:00Z 2024-01-01T01:00:00Z 2024-01-01T22:00:00Z 2024-01-01T23:00:00Z"},
		{"list", "0 0 1,3,5 1 * ?", "", "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z",
			"2024-01-01T01:00:00Z 2024-01-01T03:00:00Z 2024-01-01T05:00:00Z"},
		{"hourly", "0 0 * * * ?", "", "2024-01-01T22:00:00Z", "2024-01-02T01:00:00Z",
			"2024-01-01T22:00:00Z 2024-01-01T23:00:00Z 2024-01-02T00:00:00Z"},
		{"to is exclusive", "0 0 * * * ?", "", "2024-01-01T22:00:00Z", "2024-01-01T23:00:00Z",
			"2024-01-01T22:00:00Z"},
		{"from after to", "0 0 * * * ?", "", "2024-01-02T00:00:00Z", "2024-01-01T00:00:00Z", ""},
		{"from with sub-second part is rounded up", "0 0 * * * ?", "", "2024-01-01T22:00:00.250Z", "2024-01-02T00:00:00.5Z",
			"2024-01-01T23:00:00Z 2024-01-02T00:00:00Z"},
		{"month names any case", "0 0 0 1 nov-Feb ?", "", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			"2024-01-01T00:00:00Z 2024-02-01T00:00:00Z 2024-11-01T00:00:00Z 2024-12-01T00:00:00Z"},
		{"month numbers", "0 0 0 1 11-2 ?", "", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			"2024-01-01T00:00:00Z 2024-02-01T00:00:00Z 2024-11-01T00:00:00Z 2024-12-01T00:00:00Z"},

		// Day of week: 2024-01-01 is a Monday; 1 = Sunday.
		{"weekdays by name", "0 0 12 ? * MON-FRI", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z",
			"2024-01-01T12:00:00Z 2024-01-02T12:00:00Z 2024-01-03T12:00:00Z 2024-01-04T12:00:00Z 2024-01-05T12:00:00Z"},
		{"weekdays by number", "0 0 12 ? * 2-6", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z",
			"2024-01-01T12:00:00Z 2024-01-02T12:00:00Z 2024-01-03T12:00:00Z 2024-01-04T12:00:00Z 2024-01-05T12:00:00Z"},
		{"weekend by name, lower case", "0 0 12 ? * sun,sat", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z",
			"2024-01-06T12:00:00Z 2024-01-07T12:00:00Z"},
		{"weekend by number", "0 0 12 ? * 1,7", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z",
			"2024-01-06T12:00:00Z 2024-01-07T12:00:00Z"},
		{"wrapping day range", "0 0 12 ? * FRI-MON", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z",
			"2024-01-01T12:00:00Z 2024-01-05T12:00:00Z 2024-01-06T12:00:00Z 2024-01-07T12:00:00Z"},
		{"L alone in day-of-week is Saturday", "0 0 12 ? * L", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z",
			"2024-01-06T12:00:00Z"},
		{"WED is a name, not W", "0 0 12 ? * WED,wed", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z",
			"2024-01-03T12:00:00Z"},
		{"every day of week", "0 0 12 ? * *", "", "2024-01-01T00:00:00Z", "2024-01-03T00:00:00Z",
			"2024-01-01T12:00:00Z 2024-01-02T12:00:00Z"},

		// Day specials, 2024.
		{"L: last day of month", "0 0 0 L * ?", "", "2024-01-01T00:00:00Z", "2024-05-01T00:00:00Z",
			"2024-01-31T00:00:00Z 2024-02-29T00:00:00Z 2024-03-31T00:00:00Z 2024-04-30T00:00:00Z"},
		{"L-2", "0 0 0 L-2 * ?", "", "2024-01-01T00:00:00Z", "2024-05-01T00:00:00Z",
			"2024-01-29T00:00:00Z 2024-02-27T00:00:00Z 2024-03-29T00:00:00Z 2024-04-28T00:00:00Z"},
		{"LW: last weekday", "0 0 0 LW * ?", "", "2024-01-01T00:00:00Z", "2024-09-01T00:00:00Z",
			"2024-01-31T00:00:00Z 2024-02-29T00:00:00Z 2024-03-29T00:00:00Z 2024-04-30T00:00:00Z 2024-05-31T00:00:00Z 2024-06-28T00:00:00Z 2024-07-31T00:00:00Z 2024-08-30T00:00:00Z"},
		{"15W: Saturday moves to Friday, Sunday to Monday", "0 0 0 15W * ?", "", "2024-06-01T00:00:00Z", "2024-10-01T00:00:00Z",
			"2024-06-14T00:00:00Z 2024-07-15T00:00:00Z 2024-08-15T00:00:00Z 2024-09-16T00:00:00Z"},
		{"1W on a Saturday moves to Monday the 3rd", "0 0 0 1W * ?", "", "2024-06-01T00:00:00Z", "2024-07-01T00:00:00Z",
			"2024-06-03T00:00:00Z"},
		{"31W on the last Sunday moves to Friday; months without 31 skip", "0 0 0 31W * ?", "", "2024-03-01T00:00:00Z", "2024-09-01T00:00:00Z",
			"2024-03-29T00:00:00Z 2024-05-31T00:00:00Z 2024-07-31T00:00:00Z 2024-08-30T00:00:00Z"},
		{"6#3: third Friday", "0 0 0 ? * 6#3", "", "2024-01-01T00:00:00Z", "2024-04-01T00:00:00Z",
			"2024-01-19T00:00:00Z 2024-02-16T00:00:00Z 2024-03-15T00:00:00Z"},
		{"MON#5: fifth Monday, only some months", "0 0 0 ? * MON#5", "", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			"2024-01-29T00:00:00Z 2024-04-29T00:00:00Z 2024-07-29T00:00:00Z 2024-09-30T00:00:00Z 2024-12-30T00:00:00Z"},
		{"6L: last Friday", "0 0 0 ? * 6L", "", "2024-01-01T00:00:00Z", "2024-04-01T00:00:00Z",
			"2024-01-26T00:00:00Z 2024-02-23T00:00:00Z 2024-03-29T00:00:00Z"},
		{"FRIL: last Friday by name", "0 0 0 ? * FRIL", "", "2024-01-01T00:00:00Z", "2024-04-01T00:00:00Z",
			"2024-01-26T00:00:00Z 2024-02-23T00:00:00Z 2024-03-29T00:00:00Z"},
		{"1L: last Sunday", "0 0 0 ? * 1L", "", "2024-03-01T00:00:00Z", "2024-04-01T00:00:00Z",
			"2024-03-31T00:00:00Z"},

		// Leap days.
		{"29 February in 2024", "0 0 0 29 2 ?", "", "2023-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			"2024-02-29T00:00:00Z"},
		{"29 February not in 2023 (no 1 March)", "0 0 0 29 2 ?", "", "2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z", ""},
		{"29 February not in 2100", "0 0 0 29 2 ?", "", "2100-01-01T00:00:00Z", "2101-01-01T00:00:00Z", ""},
		{"29 February in 2000", "0 0 0 29 2 ?", "", "2000-01-01T00:00:00Z", "2001-01-01T00:00:00Z", "2000-02-29T00:00:00Z"},
		{"last day of February 2100", "0 0 0 L 2 ?", "", "2100-01-01T00:00:00Z", "2101-01-01T00:00:00Z", "2100-02-28T00:00:00Z"},
		{"impossible 31 February", "0 0 0 31 2 ?", "", "2000-01-01T00:00:00Z", "2400-01-01T00:00:00Z", ""},
		{"impossible 31 April/June/September/November", "0 0 0 31 4,6,9,11 ?", "", "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z", ""},

		// Years.
		{"year range", "0 0 0 1 1 ? 2025-2026", "", "2020-01-01T00:00:00Z", "2030-01-01T00:00:00Z",
			"2025-01-01T00:00:00Z 2026-01-01T00:00:00Z"},
		{"year step", "0 0 0 1 1 ? 2030/5", "", "2020-01-01T00:00:00Z", "2046-01-01T00:00:00Z",
			"2030-01-01T00:00:00Z 2035-01-01T00:00:00Z 2040-01-01T00:00:00Z 2045-01-01T00:00:00Z"},
		{"year list", "0 0 0 1 1 ? 2024,2199", "", "2020-01-01T00:00:00Z", "2300-01-01T00:00:00Z",
			"2024-01-01T00:00:00Z 2199-01-01T00:00:00Z"},
		{"year step from the field's start, 1970", "0 0 0 1 1 ? */25", "", "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z",
			"2020-01-01T00:00:00Z 2045-01-01T00:00:00Z 2070-01-01T00:00:00Z 2095-01-01T00:00:00Z"},
		{"year star", "0 0 0 1 1 ? *", "", "2020-01-01T00:00:00Z", "2022-01-02T00:00:00Z",
			"2020-01-01T00:00:00Z 2021-01-01T00:00:00Z 2022-01-01T00:00:00Z"},

		// America/New_York: 2024-03-10 02:00 EST -> 03:00 EDT (07:00Z),
		// 2024-11-03 02:00 EDT -> 01:00 EST (06:00Z).
		{"NY hourly across spring forward: every real hour once", "0 0 * * * ?", "America/New_York", "2024-03-10T04:00:00Z", "2024-03-10T09:00:00Z",
			"2024-03-10T04:00:00Z 2024-03-10T05:00:00Z 2024-03-10T06:00:00Z 2024-03-10T07:00:00Z 2024-03-10T08:00:00Z"},
		{"NY hourly across fall back: every real hour once", "0 0 * * * ?", "America/New_York", "2024-11-03T03:00:00Z", "2024-11-03T08:00:00Z",
			"2024-11-03T03:00:00Z 2024-11-03T04:00:00Z 2024-11-03T05:00:00Z 2024-11-03T06:00:00Z 2024-11-03T07:00:00Z"},
		{"NY minutely across spring forward", "0 * * * * ?", "America/New_York", "2024-03-10T06:58:00Z", "2024-03-10T07:02:00Z",
			"2024-03-10T06:58:00Z 2024-03-10T06:59:00Z 2024-03-10T07:00:00Z 2024-03-10T07:01:00Z"},
		{"NY minutely across fall back", "0 * * * * ?", "America/New_York", "2024-11-03T05:58:00Z", "2024-11-03T06:02:00Z",
			"2024-11-03T05:58:00Z 2024-11-03T05:59:00Z 2024-11-03T06:00:00Z 2024-11-03T06:01:00Z"},
		{"NY 02:30 does not exist: fires once at 03:30 EDT", "0 30 2 * * ?", "America/New_York", "2024-03-09T00:00:00Z", "2024-03-12T00:00:00Z",
			"2024-03-09T07:30:00Z 2024-03-10T07:30:00Z 2024-03-11T06:30:00Z"},
		{"NY 02:00/20 shifted by the gap", "0 0/20 2 * * ?", "America/New_York", "2024-03-10T00:00:00Z", "2024-03-11T00:00:00Z",
			"2024-03-10T07:00:00Z 2024-03-10T07:20:00Z 2024-03-10T07:40:00Z"},
		{"NY 02:30 shifted equals 03:30: fires once", "0 30 2,3 * * ?", "America/New_York", "2024-03-10T00:00:00Z", "2024-03-11T00:00:00Z",
			"2024-03-10T07:30:00Z"},
		{"NY window starting inside the shifted stretch", "0 30 2 * * ?", "America/New_York", "2024-03-10T07:10:00Z", "2024-03-10T07:40:00Z",
			"2024-03-10T07:30:00Z"},
		{"NY 01:30 occurs twice: fires at the first", "0 30 1 * * ?", "America/New_York", "2024-11-02T00:00:00Z", "2024-11-05T00:00:00Z",
			"2024-11-02T05:30:00Z 2024-11-03T05:30:00Z 2024-11-04T06:30:00Z"},
		{"NY every minute of 01:xx on fall-back day: first pass only", "0 0/30 1 * * ?", "America/New_York", "2024-11-03T00:00:00Z", "2024-11-04T00:00:00Z",
			"2024-11-03T05:00:00Z 2024-11-03T05:30:00Z"},
		{"NY 0-23 matches every hour: every real hour across fall back", "0 0 0-23 * * ?", "America/New_York", "2024-11-03T04:00:00Z", "2024-11-03T08:00:00Z",
			"2024-11-03T04:00:00Z 2024-11-03T05:00:00Z 2024-11-03T06:00:00Z 2024-11-03T07:00:00Z"},
		{"NY */2 lists hours: first occurrence only across fall back", "0 0 */2 * * ?", "America/New_York", "2024-11-03T03:00:00Z", "2024-11-03T10:00:00Z",
			"2024-11-03T04:00:00Z 2024-11-03T07:00:00Z 2024-11-03T09:00:00Z"},
		{"NY 1,13 lists hours: 01:00 at its first occurrence", "0 0 1,13 * * ?", "America/New_York", "2024-11-03T00:00:00Z", "2024-11-04T00:00:00Z",
			"2024-11-03T05:00:00Z 2024-11-03T18:00:00Z"},
		{"NY window inside the repeated hour of a fixed-time schedule", "0 30 1 * * ?", "America/New_York", "2024-11-03T06:00:00Z", "2024-11-03T07:00:00Z", ""},
		{"NY daily at midnight, around both changes", "0 0 0 * * ?", "America/New_York", "2024-03-09T00:00:00Z", "2024-03-12T00:00:00Z",
			"2024-03-09T05:00:00Z 2024-03-10T05:00:00Z 2024-03-11T04:00:00Z"},

		// Europe/London: 2024-03-31 01:00 GMT -> 02:00 BST (01:00Z),
		// 2024-10-27 02:00 BST -> 01:00 GMT (01:00Z).
		{"London 01:30 does not exist: 02:30 BST", "0 30 1 * * ?", "Europe/London", "2024-03-30T00:00:00Z", "2024-04-02T00:00:00Z",
			"2024-03-30T01:30:00Z 2024-03-31T01:30:00Z 2024-04-01T00:30:00Z"},
		{"London 01:30 twice: first (BST)", "0 30 1 * * ?", "Europe/London", "2024-10-26T00:00:00Z", "2024-10-29T00:00:00Z",
			"2024-10-26T00:30:00Z 2024-10-27T00:30:00Z 2024-10-28T01:30:00Z"},
		{"London hourly across spring forward", "0 0 * * * ?", "Europe/London", "2024-03-30T23:00:00Z", "2024-03-31T03:00:00Z",
			"2024-03-30T23:00:00Z 2024-03-31T00:00:00Z 2024-03-31T01:00:00Z 2024-03-31T02:00:00Z"},
		{"London hourly across fall back", "0 0 * * * ?", "Europe/London", "2024-10-26T23:00:00Z", "2024-10-27T03:00:00Z",
			"2024-10-26T23:00:00Z 2024-10-27T00:00:00Z 2024-10-27T01:00:00Z 2024-10-27T02:00:00Z"},
		{"London quarter past hourly across fall back", "0 15 * * * ?", "Europe/London", "2024-10-26T23:30:00Z", "2024-10-27T02:30:00Z",
			"2024-10-27T00:15:00Z 2024-10-27T01:15:00Z 2024-10-27T02:15:00Z"},
		{"zone without DST", "0 0 9 * * ?", "Asia/Tokyo", "2024-01-01T00:00:00Z", "2024-01-03T00:00:00Z",
			"2024-01-01T00:00:00Z 2024-01-02T00:00:00Z"},
		{"fixed zone", "0 0 0 29 2 ?", "Etc/GMT-14", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z",
			"2024-02-28T10:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := time.UTC
			if tt.zone != "" {
				loc = mustLoc(t, tt.zone)
			}
			e, err := cron.Parse(tt.expr, loc)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.expr, err)
			}
			got := e.Between(ts(t, tt.from), ts(t, tt.to))
			if g := format(got); g != tt.want {
				t.Errorf("Between(%s, %s) of %q in %s\n got: %s\nwant: %s", tt.from, tt.to, tt.expr, loc, g, tt.want)
			}
			for _, v := range got {
				if v.Location() != time.UTC || v.Nanosecond() != 0 {
					t.Errorf("fire time %v is not whole seconds in UTC", v)
				}
			}
		})
	}
}

// TestBetweenCounts checks counts where a list would be long: a fixed-time
// schedule in the repeated hour fires once per minute, an hourly one 23, 24
// or 25 times on DST change days.
func TestBetweenCounts(t *testing.T) {
	tests := []struct {
		name, expr, zone, from, to string
		want                       int
	}{
		{"minutely 7 days", "0 * * * * ?", "", "2024-01-01T00:00:00Z", "2024-01-08T00:00:00Z", 10080},
		{"every second for an hour", "* * * * * ?", "", "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", 3600},
		{"NY minutely over the spring-forward day", "0 * * * * ?", "America/New_York", "2024-03-10T05:00:00Z", "2024-03-11T04:00:00Z", 23 * 60},
		{"NY minutely over the fall-back day", "0 * * * * ?", "America/New_York", "2024-11-03T04:00:00Z", "2024-11-04T05:00:00Z", 25 * 60},
		{"NY minutely in 01:xx on the fall-back day: first pass only", "0 * 1 * * ?", "America/New_York", "2024-11-03T00:00:00Z", "2024-11-04T00:00:00Z", 60},
		{"NY hourly over a year: one per real hour", "0 0 * * * ?", "America/New_York", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 366 * 24},
		{"London hourly over a year", "0 0 * * * ?", "Europe/London", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 366 * 24},
		{"NY daily 02:30 over a year: every day once", "0 30 2 * * ?", "America/New_York", "2024-01-01T12:00:00Z", "2025-01-01T12:00:00Z", 366},
		{"NY daily 01:30 over a year: every day once", "0 30 1 * * ?", "America/New_York", "2024-01-01T12:00:00Z", "2025-01-01T12:00:00Z", 366},
		{"29 February 2000-2400", "0 0 0 29 2 ?", "", "2000-01-01T00:00:00Z", "2400-01-01T00:00:00Z", 97},
		// Go's ZoneBounds ends a period at 2040-12-31 00:00 and returns the
		// same end from there on; the scan must not crawl or stop there.
		{"London hourly across the end of 2040", "0 0 * * * ?", "Europe/London", "2040-12-30T00:00:00Z", "2041-01-02T00:00:00Z", 72},
		{"London minutely over 2040-2041 changes", "0 * * * * ?", "Europe/London", "2040-12-01T00:00:00Z", "2041-04-01T00:00:00Z", (31 + 31 + 28 + 31) * 24 * 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := time.UTC
			if tt.zone != "" {
				loc = mustLoc(t, tt.zone)
			}
			e, err := cron.Parse(tt.expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			got := e.Between(ts(t, tt.from), ts(t, tt.to))
			if len(got) != tt.want {
				t.Errorf("got %d fire times, want %d", len(got), tt.want)
			}
			for i := 1; i < len(got); i++ {
				if !got[i-1].Before(got[i]) {
					t.Fatalf("not strictly increasing at %d: %v, %v", i, got[i-1], got[i])
				}
			}
		})
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name, expr, zone, after string
		want                    string // "" for the zero Time
	}{
		{"hourly from a whole hour", "0 0 * * * ?", "", "2024-01-01T15:00:00Z", "2024-01-01T16:00:00Z"},
		{"hourly from just after", "0 0 * * * ?", "", "2024-01-01T15:00:00.250Z", "2024-01-01T16:00:00Z"},
		{"hourly from just before", "0 0 * * * ?", "", "2024-01-01T14:59:59.999Z", "2024-01-01T15:00:00Z"},
		{"leap day from 2023", "0 0 0 29 2 ?", "", "2023-01-01T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"leap day after 2024", "0 0 0 29 2 ?", "", "2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"leap day skips 2100", "0 0 0 29 2 ?", "", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"leap day in 2000", "0 0 0 29 2 ?", "", "1999-03-01T00:00:00Z", "2000-02-29T00:00:00Z"},
		{"impossible date: none ever", "0 0 0 31 2 ?", "", "2024-01-01T00:00:00Z", ""},
		{"impossible date in a zone", "0 0 0 30 2 ?", "America/New_York", "2024-01-01T00:00:00Z", ""},
		{"last year passed", "0 0 0 1 1 ? 1999", "", "2024-01-01T00:00:00Z", ""},
		{"after the last year", "0 0 0 1 1 ? 2025-2026", "", "2026-01-01T00:00:00Z", ""},
		{"future year", "0 0 0 1 1 ? 2190", "Europe/London", "2024-01-01T00:00:00Z", "2190-01-01T00:00:00Z"},
		{"fifth Sunday of February: rare", "0 0 0 ? 2 1#5", "", "2004-03-01T00:00:00Z", "2032-02-29T00:00:00Z"},
		{"NY spring forward", "0 30 2 * * ?", "America/New_York", "2024-03-09T08:00:00Z", "2024-03-10T07:30:00Z"},
		{"NY fall back, fixed time", "0 30 1 * * ?", "America/New_York", "2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"},
		{"NY fall back, hourly", "0 30 * * * ?", "America/New_York", "2024-11-03T05:30:00Z", "2024-11-03T06:30:00Z"},
		{"zero time", "0 0 0 1 1 ?", "", "0001-01-01T00:00:00Z", "0002-01-01T00:00:00Z"},
		{"end of supported range", "0 0 0 1 1 ?", "", "9999-06-01T00:00:00Z", ""},
	}
	t.Run("times beyond the supported range", func(t *testing.T) {
		e, err := cron.Parse("0 0 0 1 1 ?", mustLoc(t, "Europe/London"))
		if err != nil {
			t.Fatal(err)
		}
		lowest, highest := time.Unix(math.MinInt64, 0), time.Unix(math.MaxInt64, 999999999)
		// London's local mean time then was 1 min 15 s behind UTC.
		if got, want := e.Next(lowest), ts(t, "0001-01-01T00:01:15Z"); !got.Equal(want) {
			t.Errorf("Next(lowest time) = %v, want %v", got, want)
		}
		if got := e.Next(highest); !got.IsZero() {
			t.Errorf("Next(highest time) = %v, want zero", got)
		}
		if got := e.Between(lowest, highest); len(got) != 9999 {
			t.Errorf("Between over all time: %d fire times, want 9999 (1 January of years 1-9999)", len(got))
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := time.UTC
			if tt.zone != "" {
				loc = mustLoc(t, tt.zone)
			}
			e, err := cron.Parse(tt.expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			got := e.Next(ts(t, tt.after))
			if tt.want == "" {
				if !got.IsZero() {
					t.Errorf("Next(%s) = %v, want the zero Time", tt.after, got)
				}
				return
			}
			if want := ts(t, tt.want); !got.Equal(want) || got.Location() != time.UTC {
				t.Errorf("Next(%s) = %v, want %v", tt.after, got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 0"},
		{"0 0 0 * *", "expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 5"},
		{"0 0 0 * * ? 2024 1", "expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 8"},
		// A crontab line: its Quartz form is named when it is one for sure
		// (day-of-week by name or *: crontab counts Sunday 0, Quartz 1).
		{"0 * * * *", `expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 5 (a crontab line? Quartz starts with seconds and takes ? in one day field: "0 0 * * * ?")`},
		{"30 2 * * MON-FRI", `expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 5 (a crontab line? Quartz starts with seconds and takes ? in one day field: "0 30 2 ? * MON-FRI")`},
		{"0 0 1 * *", `expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 5 (a crontab line? Quartz starts with seconds and takes ? in one day field: "0 0 0 1 * ?")`},
		{"0 0 * * 1", "expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 5"},
		{"0 0 1 * MON", "expression: want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got 5"},
		{"60 0 0 * * ?", "seconds: value 60 out of range 0-59"},
		{"a 0 0 * * ?", `seconds: unexpected "A" (want a number)`},
		{"? 0 0 * * ?", "seconds: '?' is allowed only in day-of-month and day-of-week"},
		{"0 60 0 * * ?", "minutes: value 60 out of range 0-59"},
		{"0 */0 * * * ?", "minutes: step 0 out of range 1-60"},
		{"0 0/61 * * * ?", "minutes: step 61 out of range 1-60"},
		{"0 5/ * * * ?", `minutes: '/' must be followed by a step, got "5/"`},
		{"0 1-x * * * ?", `minutes: unexpected "X" (want a number)`},
		{"0 1,,2 * * * ?", `minutes: empty list item in "1,,2"`},
		{"0 0 24 * * ?", "hours: value 24 out of range 0-23"},
		{"0 0 L * * ?", `hours: unexpected "L" (want a number)`},
		{"0 0 0 32 * ?", "day-of-month: value 32 out of range 1-31"},
		{"0 0 0 0 * ?", "day-of-month: value 0 out of range 1-31"},
		{"0 0 0 L,1 * ?", "day-of-month: 'L' cannot be combined with other values (Quartz does not support it)"},
		{"0 0 0 1W,2 * ?", "day-of-month: 'W' cannot be combined with other values (Quartz does not support it)"},
		{"0 0 0 32W * ?", "day-of-month: value 32 out of range 1-31"},
		{"0 0 0 L-31 * ?", `day-of-month: 'L-n' needs n in 0-30, got "L-31"`},
		{"0 0 0 1#2 * ?", `day-of-month: bad use of a special character in "1#2" (day-of-month takes L, L-n, LW or nW)`},
		{"0 0 0 1 13 ?", "month: value 13 out of range 1-12"},
		{"0 0 0 1 FOO ?", `month: unknown name "FOO" (want JAN-DEC)`},
		{"0 0 0 ? * 8", "day-of-week: value 8 out of range 1-7 (1 = Sunday)"},
		{"0 0 0 ? * 0", "day-of-week: value 0 out of range 1-7 (1 = Sunday)"},
		{"0 0 0 ? * MON#6", `day-of-week: '#' needs an occurrence 1-5 after it, got "6"`},
		{"0 0 0 ? * 1#2,3", "day-of-week: '#' cannot be combined with other values (Quartz does not support it)"},
		{"0 0 0 ? * 2W", `day-of-week: 'W' is allowed only in day-of-month, got "2W"`},
		{"0 0 0 ? * FUNDAY", `day-of-week: unknown name "FUNDAY" (want SUN-SAT)`},
		{"0 0 0 1 1 ? 1969", "year: value 1969 out of range 1970-2199"},
		{"0 0 0 1 1 ? 2030-2020", "year: range 2030-2020 goes backwards"},
		{"0 0 0 1 1 ? ?", "year: '?' is allowed only in day-of-month and day-of-week"},
		{"0 0 0 * * *", `day-of-month/day-of-week: both are given; exactly one of day-of-month and day-of-week must be '?' (Quartz rule), e.g. "0 0 12 * * ?" or "0 0 12 ? * MON"`},
		{"0 0 0 ? * ?", `day-of-month/day-of-week: both are '?'; exactly one of day-of-month and day-of-week must be '?' (Quartz rule), e.g. "0 0 12 * * ?" or "0 0 12 ? * MON"`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := cron.Parse(tt.expr, time.UTC)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error %q", tt.expr, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error\n got: %s\nwant: %s", tt.expr, err, tt.want)
			}
			if !errors.Is(err, cron.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var pe *cron.ParseError
			if !errors.As(err, &pe) || pe.Field == "" {
				t.Errorf("error %v is not a *ParseError naming a field", err)
			}
		})
	}
}

func TestString(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"0 0 * * * ?", "0 0 * * * ?"},
		{"  0\t0  12 ? * mon-fri  ", "0 0 12 ? * mon-fri"},
		{"0 0 0 1 1 ? 2030", "0 0 0 1 1 ? 2030"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			e, err := cron.Parse(tt.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if _, err := cron.Parse(e.String(), nil); err != nil {
				t.Errorf("String() does not parse back: %v", err)
			}
			if e.Location() != time.UTC {
				t.Errorf("nil location did not default to UTC")
			}
		})
	}
}

func TestAppendBetweenLimit(t *testing.T) {
	e, err := cron.Parse("0 * * * * ?", mustLoc(t, "America/New_York"))
	if err != nil {
		t.Fatal(err)
	}
	from, to := ts(t, "2024-03-10T06:00:00Z"), ts(t, "2024-03-10T09:00:00Z")
	all := e.Between(from, to)
	for _, n := range []int{0, 1, 59, 60, 61, 119, 120, 121, len(all), len(all) + 5} {
		got := e.AppendBetweenLimit(nil, from, to, n)
		want := all[:min(n, len(all))]
		if format(got) != format(want) {
			t.Errorf("limit %d: got %d times, want the first %d", n, len(got), len(want))
		}
	}
	prefix := []time.Time{from}
	got := e.AppendBetween(prefix, from, to)
	if len(got) != len(all)+1 || !got[0].Equal(from) {
		t.Errorf("AppendBetween did not append to dst")
	}
}
