package engine

// Submission of the READY slots a step chose, with the submit-intent
// protocol of the package documentation.

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/pool"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// pendingSubmit is a READY slot the strategy chose, submitted at the end
// of the step.
type pendingSubmit struct {
	w   *workflow.Workflow
	svc external.Service
	st  slot.State
	// intent is the slot's submit intent as gathered (left: there is one;
	// err: it could not be read).
	intent intentRead
}

// submitAll submits the step's chosen READY slots with the submit-intent
// protocol of the package documentation, in bulk so that its durable writes
// cost a few file-system syncs per step rather than a few per slot: the
// intents of all slots (durable before any Submit), the submissions, the
// RUNNING states (in the step's write), then, once those are durable, the
// removal of the intents (apply).
func (s *stepper) submitAll(ctx context.Context) {
	e := s.e
	pending := s.pending
	s.pending = nil
	intents := make(map[slot.ID]store.Intent)
	var todo []pendingSubmit
	// unresolved: workflows with a submit intent that could not be read or
	// resolved: nothing new is submitted for them until it is (a job the
	// service may hold would not count against the workflow's concurrency).
	unresolved := make(map[string]bool)
	for _, p := range pending {
		id := p.st.ID
		if p.svc == nil {
			s.fail(id, "submit", fmt.Errorf("no external service of type %q is configured", p.w.ExternalService.Type))
			continue
		}
		in, left, err := p.intent.in, p.intent.left, p.intent.err
		if err != nil {
			unresolved[id.Workflow] = true
			s.fail(id, "submit", err)
			continue
		}
		if left && !intentOf(in, p.st) {
			// An intent of an earlier attempt (a crash between a RUNNING
			// write and the intent's removal): that job already ran; the
			// new intent below replaces it.
			e.log.Info("dropping the submit intent of an earlier attempt", "slot", id.String(),
				"intentAttempt", in.Attempt, "retryCount", p.st.RetryCount)
			left = false
		}
		if s.lostOwnership(id, "submit", nil) {
			continue
		}
		if left {
			if rec, ok := p.svc.(external.Recoverer); ok {
				var ext string
				var found bool
				err := guard(func() (err error) {
					cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
					defer cancel()
					ext, found, err = rec.Recover(cctx, p.w, id, in.Time)
					return err
				})
				if err != nil {
					unresolved[id.Workflow] = true
					s.fail(id, "recover", err)
					continue
				}
				if found {
					e.log.Info("recovered a job submitted before a crash", "slot", id.String(), "externalID", ext)
					s.running(p, ext)
					continue
				}
			} else {
				e.log.Warn("a previous submission of this slot may have reached the service, which cannot be asked; submitting again",
					"slot", id.String(), "service", p.w.ExternalService.Type, "intent", slot.FormatTime(in.Time))
			}
		}
		intents[id] = store.Intent{Attempt: p.st.RetryCount, Time: e.clock()}
		todo = append(todo, p)
	}
	todo = s.holdUnresolved(todo, intents, unresolved)
	todo = s.recordDefinitions(todo, intents)
	if len(todo) == 0 {
		return
	}
	s.claimPools(todo, intents)
	s.submitRecorded(ctx, todo, intents, e.db.PutIntents(intents))
}

// submitRecorded submits the slots of todo whose intents were recorded
// (failed: those that were not). Each Submit gets its intent's time
// (external.WithIntent): a service that waits for submissions in flight
// until their intent's time plus its call timeout sends nothing after
// that (external.SubmitWindower). The intents of a long batch are written
// again with a new time once older than a third of that window, so the
// last submissions are not refused for it.
func (s *stepper) submitRecorded(ctx context.Context, todo []pendingSubmit, intents map[slot.ID]store.Intent, failed map[slot.ID]error) {
	e := s.e
	for i, p := range todo {
		id := p.st.ID
		if err := failed[id]; err != nil {
			if s.lostOwnership(id, "submit intent", err) {
				continue
			}
			if errors.Is(err, store.ErrPoolFull) {
				s.heldByStore(p, err)
				continue
			}
			s.fail(id, "submit", fmt.Errorf("record submit intent: %w", err))
			s.persistFailed(err)
			continue
		}
		if p.w.Pool != "" {
			// Admitted by the store too: the hold of an earlier step goes.
			e.clearProblemOp(id.Workflow, id.Time, opPool)
		}
		if err := ctx.Err(); err != nil {
			s.fail(id, "submit", err) // the intent stays; harmless
			continue
		}
		// Asked again at the last moment: an instance stopped or cut off
		// since the intent was written must not submit (the intent stays;
		// the new owner resolves it).
		if s.lostOwnership(id, "submit", nil) {
			continue
		}
		if w, ok := p.svc.(external.SubmitWindower); ok && e.clock().Sub(intents[id].Time) > w.SubmitWindow()/3 {
			s.refreshIntents(todo[i:], intents, failed)
		}
		var ext string
		err := guard(func() (err error) {
			cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
			defer cancel()
			ext, err = p.svc.Submit(external.WithIntent(cctx, intents[id].Time), p.w, id)
			return err
		})
		if err != nil {
			if errors.Is(err, external.ErrNoEffect) ||
				!errors.Is(err, external.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				// A definite refusal, or a request that never left: no
				// job exists, forget the intent.
				s.dropIntents = append(s.dropIntents, id)
			}
			s.fail(id, "submit", err)
			continue
		}
		s.running(p, ext)
	}
}

// refreshIntents writes the intents of the slots of rest not yet refused
// (failed) again with the time now, in one write. An intent that could
// not be written again keeps its time; its submission may then be refused
// by the service as too late (no effect: submitted again next step).
func (s *stepper) refreshIntents(rest []pendingSubmit, intents map[slot.ID]store.Intent, failed map[slot.ID]error) {
	now := s.e.clock()
	fresh := make(map[slot.ID]store.Intent, len(rest))
	for _, p := range rest {
		if id := p.st.ID; failed[id] == nil && s.e.owns(id.Workflow) {
			fresh[id] = store.Intent{Attempt: intents[id].Attempt, Time: now} // no pool claim: admitted already
		}
	}
	refused := s.e.db.PutIntents(fresh)
	for id, in := range fresh {
		if refused[id] == nil {
			intents[id] = in
		}
	}
	if len(refused) > 0 {
		s.e.log.Warn("submit intents not written again; their submissions may be refused as late", "slots", len(refused))
	}
}

// claimPools gives the intents of pool workflows their pool's claim
// (store.Intent.Pool), ranked in the pool's order, so that a store shared
// by several instances admits them within the pool's limit across all of
// them.
func (s *stepper) claimPools(todo []pendingSubmit, intents map[slot.ID]store.Intent) {
	byPool := make(map[string][]pool.Candidate)
	for _, p := range todo {
		if _, ok := s.poolMembers[p.w.Pool]; ok {
			byPool[p.w.Pool] = append(byPool[p.w.Pool], pool.Candidate{Workflow: p.w.ID, Slot: p.st.ID.Time, Pool: p.w.Pool, Priority: p.w.Priority})
		}
	}
	for name, cands := range byPool {
		sort.SliceStable(cands, func(a, b int) bool { return pool.Before(cands[a], cands[b]) })
		for rank, c := range cands {
			id := slot.ID{Workflow: c.Workflow, Time: c.Slot}
			in := intents[id]
			in.Pool = &store.PoolClaim{Name: name, Limit: s.poolLimits[name], Workflows: s.poolMembers[name], Slots: s.poolDeparted[name], Rank: rank}
			intents[id] = in
		}
	}
}

// heldByStore keeps a slot READY that the store refused for its pool's
// limit (store.ErrPoolFull): another instance filled the pool since this
// one looked. It is a hold (a problem of op "pool"), not a failure: no
// error is counted and the slot is submitted at a later step when the
// pool has room.
func (s *stepper) heldByStore(p pendingSubmit, err error) {
	id := p.st.ID
	if s.e.setProblem(id.Workflow, id.Time, opPool, err) {
		s.e.log.Info("slot held", "slot", id.String(), "reason", err.Error())
	}
	if u, ok := s.rep.Pools[p.w.Pool]; ok {
		u.Waiting++
		s.rep.Pools[p.w.Pool] = u
	}
}

// holdUnresolved drops from todo (and intents) the new submissions of
// workflows with an unresolved submit intent: the instance that takes a
// workflow over (or restarts) resolves every open intent of it before it
// submits anything new for it.
func (s *stepper) holdUnresolved(todo []pendingSubmit, intents map[slot.ID]store.Intent, unresolved map[string]bool) []pendingSubmit {
	if len(unresolved) == 0 {
		return todo
	}
	out := todo[:0]
	for _, p := range todo {
		if !unresolved[p.st.ID.Workflow] {
			out = append(out, p)
			continue
		}
		delete(intents, p.st.ID)
		s.fail(p.st.ID, "submit", fmt.Errorf("held: an earlier submission of workflow %s is not resolved yet (see its recover problem)", p.st.ID.Workflow))
	}
	return out
}

// intentOf reports whether submit intent in belongs to the current attempt
// of st (an intent of unknown attempt, < 0, is taken to).
func intentOf(in store.Intent, st slot.State) bool {
	return in.Attempt < 0 || in.Attempt == st.RetryCount
}

// guard runs f, turning a panic into an error (an external service gone
// wrong must not take the server down).
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: internal error: %v", external.ErrUnavailable, p)
		}
	}()
	return f()
}

// running records a submitted (or recovered) slot as RUNNING in the
// step's write; its intent is removed once that is durable (apply), and
// stays if it fails: the next step recovers the job.
func (s *stepper) running(p pendingSubmit, ext string) {
	to := slot.State{ID: p.st.ID, Status: slot.Running, ExternalID: ext, RetryCount: p.st.RetryCount}
	s.writes = append(s.writes, to)
	s.e.clearProblem(to.ID.Workflow, to.ID.Time)
	s.transition(p.st, to)
	s.submitted = append(s.submitted, to.ID)
	s.noteRun(p.w, to)
	if u, ok := s.rep.Pools[p.w.Pool]; ok {
		u.Running++
		s.rep.Pools[p.w.Pool] = u
	}
}
