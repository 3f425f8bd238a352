package schema

// The checks of the run fields (constraints, pool, priority, sla, notify)
// that the CUE schema cannot make: a time window's time zone, and, when the
// installation's pools are known (celos vet --pools), the pool's name.

import (
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"

	"github.com/celos-go/celos/schema/workflow"
)

// runChecks checks the run fields of workflow w (label
// "workflows.<id>") at the positions at gives; it reports whether they
// are fine.
func (c *compiler) runChecks(label string, w *workflow.Workflow, at func(path ...cue.Selector) string) bool {
	if c.opts.Pools != nil && w.Pool != "" {
		if _, ok := c.opts.Pools[w.Pool]; !ok {
			c.errorf(at(cue.Str("pool")), "%s.pool: pool %q is not defined in %s (it defines %s)", label, w.Pool, c.opts.PoolsFile, poolNames(c.opts.Pools))
			return false
		}
	}
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

// Options are what a compilation may know of the installation.
type Options struct {
	// Pools, if not nil, are the installation's pools (name → limit, as
	// scheduler/pool parses them); a workflow naming another pool is an
	// error at its pool field. PoolsFile names them in that error.
	Pools     map[string]int
	PoolsFile string
	// Evaluated, if not nil, is called once the CUE package has been
	// evaluated without errors, before its workflows are converted: the
	// command line bounds the heap there (cmd/celos/cmd's boundHeap). It
	// is not part of the cache key.
	Evaluated func()
}

// poolNames lists the names of pools, sorted, for an error.
func poolNames(pools map[string]int) string {
	if len(pools) == 0 {
		return "no pool"
	}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, fmt.Sprintf("%q", n))
	}
	sort.Strings(names)
	if len(names) > 10 {
		names = append(names[:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	return strings.Join(names, ", ")
}
