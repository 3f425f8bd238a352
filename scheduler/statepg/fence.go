package statepg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrFenced: the write was refused because this instance no longer holds
// the lease of a workflow it writes (see docs/ha.md).
var ErrFenced = errors.New("fenced: this instance no longer holds the workflow's lease")

// Fence is checked inside every write transaction of a workflow's state
// (slot states, intents, owners, paused, rerun marks), before it commits.
// Check must lock what it reads (SELECT … FOR SHARE on the lease rows) so
// that a take-over cannot commit between the check and the commit.
type Fence interface {
	Check(ctx context.Context, tx pgx.Tx, workflows []string) error
}

// Options tune Open.
type Options struct {
	// Fence, if set, is checked in every write transaction of a
	// workflow's state (see Fence); nil means no fencing: one instance.
	Fence Fence
	// ConnectTimeout bounds connecting to the server (Open, and each new
	// connection of the pool) when the DSN sets no connect_timeout;
	// 0 means 10 seconds.
	ConnectTimeout time.Duration
	// OpTimeout bounds each call of the store (a query or a write
	// transaction); 0 means 30 seconds.
	OpTimeout time.Duration
	// IncompleteCopy opens a database an interrupted celos db migrate
	// left (celos_incomplete_copy), for the migrate that completes it;
	// without it Open fails with ErrIncompleteCopy.
	IncompleteCopy bool
}
