// Package schedule turns a workflow's schedule into slot times: cron
// schedules through schema/cron, dependent schedules resolved to the cron
// schedule at the end of their chain.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/celos-go/celos/schema/cron"
	"github.com/celos-go/celos/schema/workflow"
)

// Schedule enumerates the slot times of one workflow. Slot times are UTC
// and whole seconds. It is immutable and safe for concurrent use.
type Schedule struct {
	c   *cron.Expr
	key string
}

// NewCron returns the schedule of a Quartz cron expression in the IANA time
// zone tz ("" or "UTC" for UTC).
func NewCron(expr, tz string) (*Schedule, error) {
	s := workflow.Schedule{Type: workflow.ScheduleCron, Cron: expr, TimeZone: tz}
	loc, err := s.Location()
	if err != nil {
		return nil, err
	}
	c, err := cron.Parse(expr, loc)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %w", expr, err)
	}
	if tz == "" {
		tz = "UTC"
	}
	return &Schedule{c: c, key: "cron " + expr + " " + tz}, nil
}

// Key identifies what the schedule enumerates: two schedules with the same
// key have the same slot times.
func (s *Schedule) Key() string { return s.key }

// AppendTimes appends the slot times in [start, end) to dst, oldest first.
// A start with a sub-second part is rounded up to the next whole second, so
// a slot is never at a fractional time.
func (s *Schedule) AppendTimes(dst []time.Time, start, end time.Time) []time.Time {
	if !start.Before(end) {
		return dst
	}
	return s.c.AppendBetween(dst, start, end)
}

// Times returns the slot times in [start, end), oldest first.
func (s *Schedule) Times(start, end time.Time) []time.Time { return s.AppendTimes(nil, start, end) }

// InSchedule reports whether t is a slot time: a whole second at which the
// schedule fires (Celos's isTimeInSchedule, without its millisecond quirk).
func (s *Schedule) InSchedule(t time.Time) bool {
	if t.Nanosecond() != 0 {
		return false
	}
	var buf [1]time.Time
	return len(s.c.AppendBetween(buf[:0], t, t.Add(time.Second))) == 1
}

// Resolve returns the schedule of every workflow in ws, keyed by id. A
// dependent schedule is the schedule of the workflow it names, following
// chains; only the schedule is shared, not the other workflow's startTime.
// A workflow whose chain names a missing workflow, runs into a cycle, or
// ends in a bad cron expression gets an error naming the chain instead, and
// only that workflow is affected.
func Resolve(ws map[string]*workflow.Workflow) (map[string]*Schedule, map[string]error) {
	scheds := make(map[string]*Schedule, len(ws))
	errs := make(map[string]error)
	crons := make(map[string]*Schedule) // by cron+tz: one parse per distinct expression
	for id := range ws {
		chain := []string{id}
		cur := ws[id]
		seen := map[string]bool{id: true}
		var err error
		for err == nil && cur.Schedule.Type == workflow.ScheduleDependent {
			next := cur.Schedule.Workflow
			switch {
			case seen[next]:
				err = fmt.Errorf("dependent schedule cycle: %s → %s", strings.Join(chain, " → "), next)
			case ws[next] == nil:
				err = fmt.Errorf("dependent schedule: workflow %q not found (chain %s → %s)", next, strings.Join(chain, " → "), next)
			default:
				seen[next] = true
				chain = append(chain, next)
				cur = ws[next]
			}
		}
		if err == nil && cur.Schedule.Type != workflow.ScheduleCron {
			err = fmt.Errorf("unknown schedule type %q of workflow %q", cur.Schedule.Type, cur.ID)
		}
		if err != nil {
			errs[id] = err
			continue
		}
		k := cur.Schedule.Cron + "\x00" + cur.Schedule.TimeZone
		s, ok := crons[k]
		if !ok {
			s, err = NewCron(cur.Schedule.Cron, cur.Schedule.TimeZone)
			if err != nil {
				errs[id] = fmt.Errorf("schedule of workflow %q: %w", cur.ID, err)
				continue
			}
			crons[k] = s
		}
		scheds[id] = s
	}
	return scheds, errs
}
