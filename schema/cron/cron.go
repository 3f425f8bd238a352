// Package cron parses Quartz cron expressions and enumerates their fire
// times; `celos cron`, `celos vet` and the scheduler all use it.
package cron

import (
	"time"

	"github.com/reugn/go-quartz/quartz"
)

// Expr is a parsed cron expression. (Interim: being replaced.)
type Expr struct {
	t *quartz.CronTrigger
}

// Parse parses a Quartz cron expression evaluated in loc.
func Parse(expr string, loc *time.Location) (*Expr, error) {
	t, err := quartz.NewCronTriggerWithLoc(expr, loc)
	if err != nil {
		return nil, err
	}
	return &Expr{t: t}, nil
}
