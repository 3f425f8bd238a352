package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/celos-go/celos/internal/humandur"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/engine"

	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// loadedWorkflows returns the workflows svc has loaded when it is called,
// and the workflows files that did not load (their triggers are unknown).
func loadedWorkflows(svc scheduler.Service) func() ([]*workflow.Workflow, []scheduler.LoadError) {
	return func() ([]*workflow.Workflow, []scheduler.LoadError) {
		var ws []*workflow.Workflow
		for _, id := range svc.WorkflowIDs() {
			if w, err := svc.Workflow(id); err == nil {
				ws = append(ws, w)
			}
		}
		return ws, svc.LoadErrors()
	}
}

// pruneInterval is how often --prune-older-than prunes (a var for tests).
var pruneInterval = 24 * time.Hour

// pruner is what the state database offers for pruning (statedb.DB).
type pruner interface {
	PruneBefore(now time.Time, before func(wf string) time.Time) (int, error)
}

// pruneLimits returns the prune limit of each workflow at now: now − keep,
// or earlier for a workflow whose slot states a trigger of a loaded
// workflow reads further back than keep allows (its look-back plus
// statedb.MinRetention, trigger.LookBacks), so that pruning never breaks a
// look-back trigger, or whose run constraints count submissions further
// back (minInterval, maxRuns: Constraints.RunLookBack), so that pruning
// never lets a workflow run early. Each such extension is logged, naming
// the workflow read and the one reading it, or the period counted.
func pruneLimits(now time.Time, keep time.Duration, ws []*workflow.Workflow, log *slog.Logger) func(wf string) time.Time {
	longer := make(map[string]time.Time)
	for _, lb := range trigger.LookBacks(ws) {
		need := lb.Retention(statedb.MinRetention)
		if need <= keep {
			continue
		}
		longer[lb.Workflow] = now.Add(-need)
		log.Info("keeping a workflow's final slots longer than --prune-older-than: a trigger reads them",
			"workflow", lb.Workflow, "readBy", lb.By, "lookBack", humandur.Format(lb.Back), "olderThan", humandur.Format(keep), "keptFor", humandur.Format(need))
	}
	// minInterval and maxRuns count the submissions (the record, and the
	// slots a record of an older celos lacks) of their whole period.
	for _, w := range ws {
		need := w.Constraints.RunLookBack()
		if need <= keep {
			continue
		}
		limit := now.Add(-need) // (at most 292 years back: no overflow)
		if b, ok := longer[w.ID]; !ok || limit.Before(b) {
			longer[w.ID] = limit
		}
		log.Info("keeping a workflow's final slots and record of submissions longer than --prune-older-than: its run constraints count them",
			"workflow", w.ID, "countsBack", humandur.Format(need), "olderThan", humandur.Format(keep), "keptFor", humandur.Format(need))
	}
	return func(wf string) time.Time {
		if b, ok := longer[wf]; ok {
			return b
		}
		return now.Add(-keep)
	}
}

// pruneWaitMsg is logged when the first prune waits for the start-up read.
const pruneWaitMsg = "pruning the state database once its start-up read is done"

// waitStateRead waits until stateRead is closed (at once if it is nil) and
// reports true, or false if ctx is done first. A prune during the store's
// start-up read would read every workflow's state itself, one by one,
// under the store's lock: the server's start would wait for it as for no
// background read at all.
func waitStateRead(ctx context.Context, stateRead <-chan struct{}, log *slog.Logger) bool {
	if stateRead == nil {
		return true
	}
	select {
	case <-stateRead:
		return true
	default:
	}
	log.Info(pruneWaitMsg)
	select {
	case <-stateRead:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkPruneRetention refuses a retention shorter than statedb.MinRetention.
func checkPruneRetention(keep time.Duration) error {
	if keep > 0 && keep < statedb.MinRetention {
		return fmt.Errorf("--prune-older-than %s: must be at least %s (the 7-day window and a day)", humandur.Format(keep), humandur.Format(statedb.MinRetention))
	}
	return nil
}

// jobPruner is what the command service offers for pruning: the records
// and output logs of local runs that ended before a time.
type jobPruner interface {
	Prune(before time.Time) (int, error)
}

// startPruning prunes the state database at once (once the store's
// start-up read has ended: stateRead is closed then; nil: no such read)
// and then every pruneInterval, deleting final slots older than keep (what `celos db
// prune --older-than` does, without stopping the server; the states a
// trigger of the workflows loaded at the time reads further back are kept
// longer, see pruneLimits), and the command
// service's records of runs that ended that long ago (jobs may be nil),
// until ctx is done. The returned channel is closed when it has stopped.
// keep 0 means no pruning.
func startPruning(ctx context.Context, db io.Closer, stateRead <-chan struct{}, workflows func() ([]*workflow.Workflow, []scheduler.LoadError), jobs jobPruner, keep time.Duration, log *slog.Logger) (<-chan struct{}, error) {
	done := make(chan struct{})
	if keep <= 0 {
		close(done)
		return done, nil
	}
	if err := checkPruneRetention(keep); err != nil {
		return nil, err
	}
	p, ok := db.(pruner)
	if !ok {
		return nil, fmt.Errorf("--prune-older-than: the state database cannot be pruned")
	}
	go func() {
		defer close(done)
		if !waitStateRead(ctx, stateRead, log) {
			return
		}
		for {
			now := time.Now()
			start := time.Now()
			ws, loadErrs := workflows()
			for _, le := range loadErrs {
				// Not silent: what this file's triggers read is not known.
				log.Warn("pruning without the triggers of a workflows file that did not load: the slot states they read may be pruned", "file", le.File)
			}
			n, err := p.PruneBefore(now, pruneLimits(now, keep, ws, log))
			if err != nil {
				log.Error("prune state database", "olderThan", humandur.Format(keep), "deleted", n, "error", err)
			} else {
				log.Info("pruned state database", "olderThan", humandur.Format(keep), "deleted", n, "took", time.Since(start).Round(time.Millisecond))
			}
			pruneSLARecords(db, now, log)
			if jobs != nil {
				if m, err := jobs.Prune(now.Add(-keep)); err != nil {
					log.Error("prune command jobs", "olderThan", humandur.Format(keep), "deleted", m, "error", err)
				} else {
					log.Info("pruned command jobs", "olderThan", humandur.Format(keep), "deleted", m)
				}
			}
			t := time.NewTimer(pruneInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return done, nil
}

// pruneSLARecords removes the engine's records of SLA misses whose
// deadline no step looks at any more (engine.PruneSLARecords), with the
// slots the prune removes; the other registers are user data and stay.
func pruneSLARecords(db io.Closer, now time.Time, log *slog.Logger) {
	regs, ok := db.(engine.Registers)
	if !ok {
		return
	}
	if n, err := engine.PruneSLARecords(regs, now); err != nil {
		log.Error("prune the records of SLA misses sent", "deleted", n, "error", err)
	} else {
		log.Info("pruned the records of SLA misses sent", "deleted", n)
	}
}
