package engine

import (
	"encoding/json"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// Store is the state the engine keeps: slot states, rerun markers, submit
// intents, paused flags and workflow owners. statedb.DB (Celos's on-disk
// layout) implements it; a second store (a database server) plugs in here
// with no change to the engine. Opening a store, its lock against a second
// scheduler and closing it belong to the store and its caller, not to the
// engine. Its record types (store.RerunMark, store.Intent,
// store.Owner) and its errors (store.ErrBadName, ErrNotFound,
// ErrCorrupt, wrapped) are package store's, so a second store imports
// store and slot, never statedb.
//
// Every write the engine makes must be durable when the call returns: the
// crash-safety of submission (package documentation) depends on it.
// Methods are called from one step at a time, with reads (queries of the
// HTTP API) beside it.
type Store interface {
	// Get returns the stored state of a slot; found is false when it has
	// no record, and the error wraps store.ErrCorrupt when the record is
	// unreadable (the trigger package reads slots through it too).
	Get(id slot.ID) (st slot.State, found bool, err error)
	// Active lists the stored slots of wf whose status is not final.
	Active(wf string) ([]slot.State, error)
	// Count returns how many stored slots of wf are in each status.
	Count(wf string) (map[slot.Status]int, error)
	// Put writes one state (rerun, kill).
	Put(st slot.State) error
	// PutStates writes a step's states together (the step's one batched
	// write) and returns those that could not be written; each of them is
	// left as it was.
	PutStates(sts []slot.State) map[slot.ID]error

	// RerunMarks lists the rerun markers of wf, oldest slot first.
	RerunMarks(wf string) ([]store.RerunMark, error)
	MarkRerun(id slot.ID, at time.Time) error
	UnmarkRerun(id slot.ID) error

	// GetIntent returns a slot's submit intent, if one was left.
	GetIntent(id slot.ID) (store.Intent, bool, error)
	// PutIntents records submit intents together, durable before it
	// returns; it returns those that could not be recorded. A store
	// shared by several instances may refuse those of a pool with no room
	// left (store.Intent.Pool) with an error wrapping store.ErrPoolFull:
	// the engine holds such a slot READY, as its own admission would.
	PutIntents(ins map[slot.ID]store.Intent) map[slot.ID]error
	DeleteIntent(id slot.ID) error
	DeleteIntents(ids []slot.ID) error

	Paused(wf string) bool
	SetPaused(wf string, paused bool) error

	// Owners returns which workflows file owns each workflow id (see the
	// loader); SetOwner and DeleteOwner change one record (a store that
	// writes many at once offers ownersWriter).
	Owners() (map[string]store.Owner, error)
	SetOwner(wf string, o store.Owner) error
	DeleteOwner(wf string) error
}

// Registers is the key-value store behind the register operations of the
// API. statedb.DB implements it.
type Registers interface {
	GetRegister(bucket, key string) (json.RawMessage, error)
	PutRegister(bucket, key string, value json.RawMessage) error
	DeleteRegister(bucket, key string) error
	DeleteRegistersWithPrefix(bucket, prefix string) error
	RegisterKeys(bucket, prefix string) ([]string, error)
}

// What a store may offer besides Store; the engine uses it when it does.
type (
	// preloader reads the state of many workflows in parallel (start-up).
	preloader interface {
		Preload(wfs []string, workers int)
	}
	// backgroundLoader reads the state of many workflows in the
	// background (start-up) and tells which are read; a step then steps
	// those and leaves the others to a later step instead of waiting for
	// all (statedb: 11–21 s at 10,000 hourly workflows with a full
	// window).
	backgroundLoader interface {
		LoadInBackground(wfs []string, workers int) <-chan struct{}
		Loaded(wf string) bool
	}
	// ownersWriter records and removes the owner records of a load
	// together — one transaction, or one pair of file-system syncs — and
	// returns those it could not write or remove; a crash leaves each
	// record old or new, never torn. Without it, each record is a write
	// of its own (10,000 new workflows: 10,000 transactions or fsync
	// pairs).
	ownersWriter interface {
		WriteOwners(set map[string]store.Owner, remove []string) map[string]error
	}
	// problemBoard shares the problems of workflows between the instances
	// on one store (Options.Owns; docs/ha.md): the owner of a workflow
	// publishes the set of its problems when it changes, and the others
	// show what was published for the workflows they do not own.
	problemBoard interface {
		// PublishProblems replaces the published problems of each
		// workflow of set (an empty list: none), all or nothing, fenced
		// like the store's other writes (a workflow this instance no
		// longer owns is refused).
		PublishProblems(set map[string][]scheduler.Problem) error
		// ClearPublished empties the published problems of workflows
		// no instance steps any more (removed), without the fence.
		ClearPublished(wfs []string) error
		// PublishedProblems returns the problems published for wf ("":
		// every workflow) as the store last read or wrote them,
		// oldest slot first; PublishedWorkflows the workflows with
		// some.
		PublishedProblems(wf string) []scheduler.Problem
		PublishedWorkflows() []string
	}
	// poolCounter reads, from a store several instances share, the slots
	// of the given workflows that are RUNNING or have an open submit
	// intent in the database now, whichever instance wrote them: what the
	// store's pool admission (PutIntents) counts, fresher than Active,
	// which sees another instance's writes only after its next refresh
	// (every lease/3). The engine asks it when its own view would hold a
	// slot of a pool (admitPools).
	poolCounter interface {
		PoolOccupied(wfs []string) ([]slot.ID, error)
	}
	// runRecorder keeps the recent submissions of the workflows with run
	// constraints (minInterval, maxRuns): the engine writes a workflow's
	// record after a step submitted for it, before the RUNNING states, and
	// reads it once when it starts stepping the workflow (a restart, a
	// take-over), so that those submissions count at their real times
	// (runsOf). Without it, and for slots the record does not name (state
	// an older celos wrote), a slot that had a job counts at its slot time.
	runRecorder interface {
		// Runs returns the submissions recorded for wf (none: nil).
		Runs(wf string) ([]store.Run, error)
		// PutRuns replaces the record of each workflow of set, durable
		// when it returns (fenced like the store's other writes), and
		// returns the workflows whose record it could not write.
		PutRuns(set map[string][]store.Run) map[string]error
	}
	// runBatchReader reads the records of many workflows in one round
	// trip (a store on a server): the first step after a restart or a
	// take-over reads the records of every constrained workflow it starts
	// stepping with one call (preloadRuns) instead of one per workflow.
	runBatchReader interface {
		// RunsOf returns the record of each workflow of wfs that has
		// one.
		RunsOf(wfs []string) (map[string][]store.Run, error)
	}
	// registerBatcher writes and removes many registers of one bucket
	// together — one transaction, or one pair of file-system syncs — and
	// returns the keys it could not write or remove; every key it does not
	// report is durable when it returns, and a crash leaves each key old
	// or new, never torn. The outbox's records of a step go through it
	// (prepareOutbox) and so do those of the events whose state could not
	// be written (discardOutbox). Without it, each record is a write of
	// its own (a file, a rename and a directory fsync; a round trip).
	registerBatcher interface {
		PutRegisters(bucket string, kv map[string]json.RawMessage) map[string]error
		DeleteRegisters(bucket string, keys []string) map[string]error
	}
	// reloader drops the store's cache (ClearCache).
	reloader interface{ Reload() error }
	// writeCounter counts the files the store wrote (StepReport.Writes).
	writeCounter interface{ Stats() store.Stats }
)
