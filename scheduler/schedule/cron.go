package schedule

import (
	"time"

	"github.com/reugn/go-quartz/quartz"
)

// Interim: go-quartz until schema/cron offers Between; see parseCron.
type quartzCron struct{ t *quartz.CronTrigger }

func parseCron(expr string, loc *time.Location) (cronTimes, error) {
	t, err := quartz.NewCronTriggerWithLoc(expr, loc)
	if err != nil {
		return nil, err
	}
	return quartzCron{t}, nil
}

func (q quartzCron) appendBetween(dst []time.Time, from, to time.Time) []time.Time {
	from = ceilSecond(from)
	prev := from.Add(-time.Second).UnixNano()
	for {
		n, err := q.t.NextFireTime(prev)
		if err != nil {
			return dst
		}
		t := time.Unix(0, n).UTC()
		if !t.Before(to) {
			return dst
		}
		if !t.Before(from) {
			dst = append(dst, t)
		}
		prev = n
	}
}

func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
