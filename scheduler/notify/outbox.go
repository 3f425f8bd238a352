package notify

// The outbox and the stop: deliveries whose ids came with their event are
// kept by the engine in the state database until the sender reports them
// finished (delivered or given up); what the sender lets go of otherwise
// is released, kept, and offered again.

import (
	"context"
	"time"
)

// DefaultDrainTimeout bounds how long Close goes on delivering what is
// queued before it stops (Options.DrainTimeout).
const DefaultDrainTimeout = 5 * time.Second

// Outbox keeps deliveries durably (the engine's outbox in the state
// database) and hears what became of each. Its methods are called from the
// sender's goroutines and must not block for long.
type Outbox interface {
	// Finished: the delivery was made or given up (attempts exhausted, an
	// answer that is not retried); the outbox forgets it.
	Finished(workflow, delivery string)
	// Released: the sender let go of the deliveries without an outcome
	// (the sender stopped, its queue was full, the workflow is no longer
	// this instance's); the outbox keeps them and offers them again
	// later. What the sender lets go of at once (at a stop: every delivery
	// waiting for its retry, then every one still queued) comes in one
	// call, which the outbox writes together.
	Released(deliveries ...string)
	// Mine reports whether this instance delivers the events of workflow
	// now (with several instances: it steps the workflow).
	Mine(workflow string) bool
}

// SetOutbox sets the outbox (Options.Outbox) of a sender created before
// it; call it before the first event with delivery ids.
func (s *Sender) SetOutbox(o Outbox) {
	s.mu.Lock()
	s.outbox = o
	s.mu.Unlock()
}

func (s *Sender) getOutbox() Outbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outbox
}

// mine reports whether the deliveries of wf are still this sender's.
func (s *Sender) mine(wf string) bool {
	o := s.getOutbox()
	return o == nil || o.Mine(wf)
}

// finished reports d's outcome to the outbox.
func (s *Sender) finished(d *delivery) {
	if o := s.getOutbox(); d.durable && o != nil {
		o.Finished(d.workflow, d.id)
	}
}

// letGo gives up ds without an outcome: those the outbox keeps are
// released to it, together; the others are dropped (counted and logged).
func (s *Sender) letGo(reason string, ds ...*delivery) {
	o := s.getOutbox()
	var keep []*delivery
	for _, d := range ds {
		if d.durable && o != nil {
			keep = append(keep, d)
			continue
		}
		s.opts.Logger.Warn("notification dropped", "event", d.event, "url", redact(d.target.URL), "delivery", d.id, "reason", reason)
		s.result(d.event, Dropped)
	}
	if len(keep) > 0 {
		s.release(reason, keep...)
	}
}

// release hands ds back to the outbox, which keeps them.
func (s *Sender) release(reason string, ds ...*delivery) {
	ids := make([]string, len(ds))
	for i, d := range ds {
		s.opts.Logger.Info("notification kept in the outbox for later", "event", d.event, "url", redact(d.target.URL),
			"delivery", d.id, "reason", reason)
		s.result(d.event, Kept)
		ids[i] = d.id
	}
	s.getOutbox().Released(ids...)
}

// Close stops the sender. The deliveries queued are attempted once more
// for at most DrainTimeout (or until ctx ends, if sooner); a delivery
// waiting for its retry is not waited for. What is left — still queued,
// waiting for a retry, or in flight when the time is up (its request is
// cancelled) — is released to the outbox, which keeps it for the next
// start (those waiting, then those queued, each group in one call of
// Released), or, for a delivery the outbox does not hold, dropped
// (counted).
// Close returns ctx's error if ctx ended first.
func (s *Sender) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	waiting := make([]*delivery, 0, len(s.timers))
	for t, d := range s.timers {
		t.Stop()
		waiting = append(waiting, d)
	}
	s.timers = nil
	s.mu.Unlock()
	close(s.closing)
	s.letGo("the server stopped while the delivery waited for its retry", waiting...)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	timer := time.NewTimer(s.opts.DrainTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.stop() // cancels the attempts in flight; they let their delivery go
	<-done
	var left []*delivery
	for {
		select {
		case d := <-s.queue:
			left = append(left, d)
		default:
			s.letGo("the server stopped before the delivery's turn", left...)
			return err
		}
	}
}
