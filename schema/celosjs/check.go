package celosjs

import (
	"fmt"
	"sort"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/celos-go/celos/schema/workflow"
)

// Difference is one workflow on which the JavaScript and the CUE package
// disagree.
type Difference struct {
	// ID is the workflow's id.
	ID string
	// Pos is where the JavaScript defined it (zero when only the CUE has it).
	Pos Pos
	// Msg says what differs: a go-cmp diff "(-javascript +cue)", or that
	// one side lacks the workflow.
	Msg string
}

func (d Difference) String() string {
	if d.Pos.File == "" {
		return fmt.Sprintf("workflow %q: %s", d.ID, d.Msg)
	}
	return fmt.Sprintf("%s: workflow %q: %s", d.Pos, d.ID, d.Msg)
}

// checked is what is compared for one workflow: the compiled workflow,
// and for a property function the properties celos would submit (time
// tokens substituted) at each sample slot time.
type checked struct {
	workflow.Workflow
	PropertiesAt map[string]map[string]string
}

// Compare compares, workflow by workflow, the compiled CUE project with
// the workflows the JavaScript defined (those of files that evaluated):
// the same ids, schedules, triggers, strategies, services, properties and
// the rest. A property function is compared by what celos would submit at
// each of SampleTimes. No differences: equivalent.
func Compare(res *Result, p *workflow.Project) []Difference {
	cue := map[string]workflow.Workflow{}
	for _, w := range p.Workflows {
		cue[w.ID] = w
	}
	var diffs []Difference
	js := map[string]bool{}
	for _, w := range res.Workflows() {
		js[w.ID] = true
		c, ok := cue[w.ID]
		if !ok {
			diffs = append(diffs, Difference{w.ID, w.Pos, "defined by the JavaScript, missing from the CUE package"})
			continue
		}
		want, got := checked{Workflow: w.Workflow}, checked{Workflow: c}
		if w.Props != nil {
			want.ExternalService.Properties, got.ExternalService.Properties = nil, nil
			want.PropertiesAt, got.PropertiesAt = map[string]map[string]string{}, map[string]map[string]string{}
			for _, t := range SampleTimes {
				at := t.Format(time.RFC3339)
				props, err := w.Props.At(t)
				if err != nil {
					props = map[string]string{"(the property function fails)": err.Error()}
				}
				want.PropertiesAt[at] = substituted(props, t)
				got.PropertiesAt[at] = substituted(c.ExternalService.Properties, t)
			}
		}
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
			diffs = append(diffs, Difference{w.ID, w.Pos, "differs (-javascript +cue):\n" + d})
		}
	}
	var extra []string
	for id := range cue {
		if !js[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	for _, id := range extra {
		diffs = append(diffs, Difference{ID: id, Msg: "in the CUE package, defined by no JavaScript file that evaluated"})
	}
	return diffs
}

func substituted(props map[string]string, t time.Time) map[string]string {
	out := make(map[string]string, len(props))
	for k, v := range props {
		out[k] = Substitute(v, t)
	}
	return out
}
