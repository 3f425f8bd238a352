package schema

// The checks of the run fields (constraints, pool, priority, sla, notify)
// that the CUE schema cannot make: a time window's time zone.

import (
	"cuelang.org/go/cue"

	"github.com/celos-go/celos/schema/workflow"
)

// runChecks checks the run fields of workflow w (label
// "workflows.<id>") at the positions at gives; it reports whether they
// are fine.
func (c *compiler) runChecks(label string, w *workflow.Workflow, at func(path ...cue.Selector) string) bool {
	if w.Constraints == nil || w.Constraints.TimeWindow == nil {
		return true
	}
	tw := w.Constraints.TimeWindow
	if _, err := tw.Location(); err != nil {
		c.errorf(at(cue.Str("constraints"), cue.Str("timeWindow"), cue.Str("timeZone")), "%s.constraints.timeWindow.timeZone: %s", label, zoneProblem(tw.TimeZone, err))
		return false
	}
	return true
}

// windowsOf checks the time zones of the time windows of a project that
// has other errors: each one that is a concrete string.
func (c *compiler) windowsOf(wfs cue.Value) {
	it, err := wfs.Fields()
	if err != nil {
		return
	}
	for it.Next() {
		label := "workflows." + cuePathLabel(it.Selector().Unquoted())
		zv := it.Value().LookupPath(cue.ParsePath("constraints.timeWindow.timeZone"))
		zone, err := zv.String()
		if err != nil {
			continue
		}
		if _, err := (&workflow.TimeWindow{TimeZone: zone}).Location(); err != nil {
			c.errorf(c.valuePos(zv), "%s.constraints.timeWindow.timeZone: %s", label, zoneProblem(zone, err))
		}
	}
}
