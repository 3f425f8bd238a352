// Package store holds what every scheduler state store shares: the records
// it keeps beside slot states (submit intents, rerun markers, workflow
// owners), its operation counters and the errors it reports. The engine's
// Store interface (scheduler/engine) is written in these types, so a store —
// the Celos file layout in scheduler/statedb, or a database server — needs
// this package and slot, not another store's package.
package store

import (
	"errors"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// Errors a store returns, wrapped with details.
var (
	// ErrNotFound: no such register.
	ErrNotFound = errors.New("not found")
	// ErrBadName: a workflow id, bucket or key that cannot be stored
	// (in the file store: that cannot be a path component).
	ErrBadName = errors.New("bad name")
	// ErrCorrupt: a stored record that does not parse.
	ErrCorrupt = errors.New("corrupt state file")
	// ErrPoolFull: a submit intent of a pool's workflow was not recorded
	// because the pool has no room across every instance on the store
	// (see Intent.Pool). The slot is not to be submitted now; it is not a
	// failure. Wrapped so that the message reads "pool "etl" is full: ...".
	ErrPoolFull = errors.New("full")
)

// Intent is a submission the engine was about to make: written before
// Submit is called and removed once the slot is recorded RUNNING. See
// external.Recoverer.
type Intent struct {
	// Attempt is the slot's retry count at submission.
	Attempt int `json:"attempt"`
	// Time is the wall-clock time of the submission.
	Time time.Time `json:"time"`
	// Pool, when set, is the pool of the slot's workflow: a store shared
	// by several instances (statepg) records the intent only if the pool
	// has room, counted inside the transaction that records it, and
	// refuses it otherwise with an error wrapping ErrPoolFull. A store of
	// one instance (statedb) records it as any other: the engine's own
	// admission is exact there. Pool is not stored: an intent read back
	// has none.
	Pool *PoolClaim `json:"-"`
}

// Run is one submission the engine made: the slot, its attempt (the
// slot's retry count) and when. Run constraints (minInterval, maxRuns)
// count them; a store that keeps them (the engine's optional runRecorder)
// lets a restarted engine, or the instance that takes a workflow over,
// count the real times rather than the slot times.
type Run struct {
	Slot    time.Time `json:"slot"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// CeilMilli is t in UTC rounded up to a whole millisecond, the precision
// the stores keep times at: a submission time stored is never earlier
// than the real one.
func CeilMilli(t time.Time) time.Time {
	r := t.UTC().Truncate(time.Millisecond)
	if r.Before(t) {
		r = r.Add(time.Millisecond)
	}
	return r
}

// PoolClaim is what a store needs to admit a submit intent of a pool's
// workflow: the slots of the pool that count against its limit are those
// of Workflows that are RUNNING or have an open submit intent, and those
// of Slots that are RUNNING.
type PoolClaim struct {
	// Name and Limit are the pool's, from the pools file.
	Name  string
	Limit int
	// Workflows are every workflow of the pool in the instance's
	// configuration (those of other instances included), sorted; the
	// intents of one pool share the slice.
	Workflows []string
	// Slots are slots of workflows that are no longer the pool's
	// (undeployed, or moved to another pool, while they ran): each counts
	// against the limit while it is RUNNING. The intents of one pool
	// share the slice.
	Slots []slot.ID
	// Rank orders the intents of one pool in one call: a lower rank is
	// admitted first (the engine's order: higher priority, then older
	// slot, then workflow id).
	Rank int
}

// RerunExpiry is how long a rerun marker lives after it was written (Celos's
// RerunState.EXPIRATION_DAYS); celos keeps a marker past it until its slot
// is final.
const RerunExpiry = 14 * 24 * time.Hour

// RerunMark is a slot marked for rerun and when it was marked.
type RerunMark struct {
	Slot time.Time
	At   time.Time
}

// Expired reports whether the mark is older than RerunExpiry at now.
func (m RerunMark) Expired(now time.Time) bool { return m.At.Add(RerunExpiry).Before(now) }

// Owner records which workflows file owns a workflow id. Two projects may
// both define an id; the server runs the one that had it first, and the
// record makes that choice survive restarts (the order of the files in the
// workflows directory does not decide it).
type Owner struct {
	// Project is the project name of the workflows document.
	Project string `json:"project"`
	// File is the name of the workflows file it was last loaded from.
	File string `json:"file"`
}

// Stats counts a store's operations since it was opened: Writes are
// records written or removed (files written, renamed or removed in the
// file store); Reads are records read.
type Stats struct {
	Writes int64
	Reads  int64
}
