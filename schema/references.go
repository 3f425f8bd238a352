package schema

// The reference warnings: workflows named by dependent schedules and
// success, failure and sinceLast triggers that are not in the project.

import (
	"fmt"

	"cuelang.org/go/cue"

	"github.com/celos-go/celos/schema/workflow"
)

// references warns about dependent schedules and success triggers naming
// workflows that are not in the project (they may be in another project of
// the same installation).
func (c *compiler) references(p *workflow.Project, wfs cue.Value) {
	ids := make(map[string]bool, len(p.Workflows))
	for _, w := range p.Workflows {
		ids[w.ID] = true
	}
	for _, w := range p.Workflows {
		// The workflow's value and label are looked up for a warning
		// only: most workflows have none, and each lookup costs CUE an
		// evaluation context.
		var wv cue.Value
		label := ""
		at := func(path cue.Path) string {
			if label == "" {
				wv = wfs.LookupPath(cue.MakePath(cue.Str(w.ID)))
				label = "workflows." + cuePathLabel(w.ID)
			}
			return c.valuePos(wv.LookupPath(path))
		}
		if w.Schedule.Type == workflow.ScheduleDependent && !ids[w.Schedule.Workflow] {
			pos := at(cue.MakePath(cue.Str("schedule"), cue.Str("workflow")))
			c.warnf(pos, "%s.schedule.workflow: workflow %q is not in this project (fine if another project of the installation defines it)", label, w.Schedule.Workflow)
		}
		var walk func(t *workflow.Trigger, path []cue.Selector, name string)
		walk = func(t *workflow.Trigger, path []cue.Selector, name string) {
			sub := func(n ...cue.Selector) []cue.Selector { return append(path[:len(path):len(path)], n...) }
			switch t.Type {
			case workflow.TriggerSuccess, workflow.TriggerFailure, workflow.TriggerSinceLast:
				if !ids[t.Workflow] {
					pos := at(cue.MakePath(sub(cue.Str("workflow"))...))
					c.warnf(pos, "%s.%s.workflow: workflow %q is not in this project (fine if another project of the installation defines it)", label, name, t.Workflow)
				}
			case workflow.TriggerAnd, workflow.TriggerOr:
				for i := range t.Triggers {
					walk(&t.Triggers[i], sub(cue.Str("triggers"), cue.Index(i)), fmt.Sprintf("%s.triggers.%d", name, i))
				}
			case workflow.TriggerNot, workflow.TriggerOffset:
				if t.Trigger != nil {
					walk(t.Trigger, sub(cue.Str("trigger")), name+".trigger")
				}
			}
		}
		walk(&w.Trigger, []cue.Selector{cue.Str("trigger")}, "trigger")
	}
}
