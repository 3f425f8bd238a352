package engine

// Problems shared between instances (docs/ha.md): when several instances
// step the workflows of one store (Options.Owns) and the store offers a
// problemBoard, the owner of a workflow publishes its problems (a bounded
// set per workflow, written when it changes) after each step, and every
// instance shows the published problems of the workflows it does not own
// beside its own.

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/celos-go/celos/scheduler"
)

// Bounds of what is published per workflow: a workflow with many failing
// slots, or a trigger whose error text grows, cannot grow the store
// without limit. The owning instance lists them all.
const (
	maxPublished      = 100  // problems of a workflow
	maxPublishedError = 1000 // bytes of a problem's Error
	// opMore is the op of the last published problem of a workflow that
	// has more than maxPublished.
	opMore = "more"
)

// board is the store's problem board when problems are shared, nil when
// they are not (one instance, or a store without one).
func (e *Engine) board() problemBoard {
	if e.opts.Owns == nil {
		return nil
	}
	b, _ := e.db.(problemBoard)
	return b
}

// publishProblems publishes the problems of the workflows of todo (the
// step's) this engine still owns whose set differs from the published
// one, and empties those published for workflows c no longer has. A
// failure is logged: the next step tries again (its comparison is with
// what the store holds).
func (e *Engine) publishProblems(c *config, todo []string) {
	b := e.board()
	if b == nil {
		return
	}
	own := e.problemsByWorkflow()
	set := make(map[string][]scheduler.Problem)
	for _, wf := range todo {
		if !e.owns(wf) {
			continue // taken over during the step: the new owner publishes
		}
		ps := bounded(wf, own[wf])
		if !sameProblems(ps, b.PublishedProblems(wf)) {
			set[wf] = ps
		}
	}
	if len(set) > 0 {
		if err := b.PublishProblems(set); err != nil {
			e.log.Warn("problems not published; the other instances show the previous ones until a later step publishes them", "workflows", len(set), "error", err)
		}
	}
	var gone []string
	for _, wf := range b.PublishedWorkflows() {
		if c.workflows[wf] == nil {
			gone = append(gone, wf)
		}
	}
	if len(gone) > 0 {
		if err := b.ClearPublished(gone); err != nil {
			e.log.Warn("problems of removed workflows not cleared", "workflows", len(gone), "error", err)
		}
	}
}

// problemsByWorkflow returns this engine's problems by workflow, oldest
// slot first (a map of the workflows with problems only: no allocation
// per workflow at every step).
func (e *Engine) problemsByWorkflow() map[string][]scheduler.Problem {
	out := make(map[string][]scheduler.Problem)
	e.mu.RLock()
	for k, p := range e.problems {
		out[k.wf] = append(out[k.wf], p)
	}
	for id, p := range e.sla {
		out[id.Workflow] = append(out[id.Workflow], p)
	}
	e.mu.RUnlock()
	for _, ps := range out {
		sortProblems(ps)
	}
	return out
}

// bounded returns what is published of the problems ps of workflow wf
// (sorted): the first maxPublished, each Error cut to maxPublishedError
// bytes, and a last problem of op "more" that counts the others.
func bounded(wf string, ps []scheduler.Problem) []scheduler.Problem {
	if len(ps) == 0 {
		return nil // (no allocation per workflow without problems, at every step)
	}
	n := min(len(ps), maxPublished)
	out := make([]scheduler.Problem, 0, n+1)
	for _, p := range ps[:n] {
		p.Error = cut(p.Error, maxPublishedError)
		out = append(out, p)
	}
	if more := len(ps) - n; more > 0 {
		out = append(out, scheduler.Problem{Workflow: wf, Op: opMore, At: ps[n].At,
			Error: fmt.Sprintf("%d more problems of this workflow are not shared; the instance that steps it lists them all", more)})
	}
	return out
}

// cut shortens s to at most n bytes, on a character boundary, marking the
// cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " [...]"
	i := n - len(mark)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
}

// sameProblems reports whether two sorted lists of problems are the same
// but for their At (a problem met again at every step is not news).
func sameProblems(a, b []scheduler.Problem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Workflow != b[i].Workflow || !a[i].Slot.Equal(b[i].Slot) || a[i].Op != b[i].Op || a[i].Error != b[i].Error {
			return false
		}
	}
	return true
}

// sortProblems sorts problems by workflow, slot, then op.
func sortProblems(ps []scheduler.Problem) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Workflow != ps[j].Workflow {
			return ps[i].Workflow < ps[j].Workflow
		}
		if !ps[i].Slot.Equal(ps[j].Slot) {
			return ps[i].Slot.Before(ps[j].Slot)
		}
		return ps[i].Op < ps[j].Op
	})
}
