package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// drive steps the case's workflows through its range in simulated time,
// as Celos CI did. At each slot time t the engine steps at t+1s (a step at
// now looks at the slots before now): again at once after a step that
// changed a slot, again after a pause while a slot is READY or RUNNING (a
// command job's end is seen at once, see pause), and once nothing is
// READY or RUNNING and a step changed nothing, time jumps to the next slot
// time of a workflow under test, up to the case's end (included). A delay
// trigger therefore becomes ready at the first slot time stepped after its
// delay. The context (the case's timeout) bounds it.
func (s *sandboxCase) drive(ctx context.Context) error {
	poll := s.r.opts.Poll
	seen := map[slot.ID]slot.Status{}
	t := s.c.Start
	for {
		now := t.Add(time.Second)
		if err := s.eng.Step(ctx, now, s.ids); err != nil {
			return fmt.Errorf("step at %s: %w", slot.FormatTime(now), err)
		}
		moved := 0
		for _, n := range s.eng.LastStep().Transitions {
			moved += n
		}
		active, commands := 0, 0
		sts, err := s.slotsOf(ctx, s.ids)
		if err != nil {
			return fmt.Errorf("after the step at %s: %w", slot.FormatTime(now), err)
		}
		for _, st := range sts {
			if st.ID.Time.After(t) {
				continue
			}
			if old, ok := seen[st.ID]; (ok && old != st.Status) || (!ok && st.Status != slot.Waiting) {
				from := old
				if !ok {
					from = slot.Waiting
				}
				s.res.Log = append(s.res.Log, fmt.Sprintf("%s  %s %s → %s", t.Format(time.RFC3339), st.ID, from, st.Status))
			}
			seen[st.ID] = st.Status
			if st.Status == slot.Ready || st.Status == slot.Running {
				active++
			}
			if st.Status == slot.Running && s.types[st.ID.Workflow] == workflow.ServiceCommand {
				commands++
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if moved > 0 {
			// Something changed: submit what became ready, or look at
			// what waited on a slot that finished, at once.
			continue
		}
		if active > 0 {
			if err := s.pause(ctx, commands > 0, poll); err != nil {
				return err
			}
			continue
		}
		next, ok := s.next(t)
		if !ok {
			return nil
		}
		t = next
	}
}

// next returns the first slot time of a workflow under test after t and
// no later than the case's end.
func (s *sandboxCase) next(t time.Time) (time.Time, bool) {
	var best time.Time
	for _, id := range s.ids {
		sched, err := s.eng.Schedule(id)
		if err != nil {
			continue
		}
		times := sched.Times(t.Add(time.Second), s.c.End.Add(time.Second))
		if len(times) > 0 && (best.IsZero() || times[0].Before(best)) {
			best = times[0]
		}
	}
	return best, !best.IsZero()
}

// minPause is the least pause between two steps while something runs.
const minPause = 5 * time.Millisecond

// pause waits before the next step while something runs: at most poll,
// and no longer than until the case's command jobs have all ended when
// one of them runs (their supervisors are this process's children, so
// the end of a job is seen at once, not at the next poll; unless a job
// left processes running, whose supervisor stays until the case ends).
func (s *sandboxCase) pause(ctx context.Context, commands bool, poll time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, poll)
	defer cancel()
	if commands {
		started := time.Now()
		if s.cmd.Wait(wctx) == nil && time.Since(started) < minPause {
			// Nothing was left to wait for: do not spin.
			time.Sleep(minPause)
		}
		return ctx.Err()
	}
	<-wctx.Done()
	return ctx.Err()
}
