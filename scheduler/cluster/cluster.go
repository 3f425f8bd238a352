// Package cluster lets several `celos server` instances share one
// PostgreSQL database (docs/ha.md): each instance keeps a heartbeat row,
// the workflows are spread over the live instances by rendezvous hashing,
// and an instance steps a workflow only while it holds the workflow's lease,
// a row with an expiry (the database's clock) and a fencing token (a
// sequence) that every write of the workflow's state checks (Check, the
// statepg.Fence hook). An instance that lost a lease — paused, partitioned,
// slow — can no longer write the workflow's state nor, by Owns, submit.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/celos-go/celos/scheduler/statepg"
)

// DefaultLease is the lease (and heartbeat time-to-live) when Options.Lease is 0.
const DefaultLease = 15 * time.Second

// MinLease is the shortest lease accepted (tests use short ones).
const MinLease = 300 * time.Millisecond

// MaxClockSkew is how far this host's wall clock may be from the
// database's: an instance further off takes no workflow (ErrClockSkew).
// Leases never compare two instances' clocks, but a submit intent's time
// is its writer's clock and the wait for a submission in flight (Oozie)
// is measured by the instance that takes the workflow over: instances
// whose clocks differ by minutes would cut that wait short, or make it
// minutes long (docs/ha.md).
const MaxClockSkew = time.Second

// Errors, wrapped with details.
var (
	// ErrClockSkew: this host's clock is more than MaxClockSkew from the
	// database's; the instance holds no lease until they agree.
	ErrClockSkew = errors.New("this host's clock is off the database's")
	// ErrInstanceInUse: another live process runs under the instance id.
	ErrInstanceInUse = errors.New("instance id in use by a live process")
	// ErrReplaced: a newer process took over this instance id; this one
	// holds nothing any more.
	ErrReplaced = errors.New("instance id taken over by another process")
	// ErrNoSchema: the cluster tables are missing (migration 0002_cluster).
	ErrNoSchema = errors.New("cluster tables missing (migration 0002_cluster not applied)")
)

// Options configure a Cluster.
type Options struct {
	// ID names the instance: unique among the instances of the database,
	// stable across restarts. Default: the host name.
	ID string
	// Host is recorded with the instance (command jobs run there).
	// Default: the host name.
	Host string
	// Lease is how long a lease and a heartbeat last without renewal
	// (DefaultLease if 0). Renewal runs every Lease/3; another instance
	// takes a workflow over within about Lease + Lease/3 of its holder's
	// last renewal.
	Lease time.Duration
	// Workflows lists the workflow ids to share out (the loaded
	// workflows); nil means none.
	Workflows func() []string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Clock is the wall clock compared with the database's at each
	// heartbeat (MaxClockSkew); nil means time.Now. Leases use the
	// monotonic clock whatever it is.
	Clock func() time.Time
}

// Cluster is one instance's membership and leases. Its methods are safe
// for concurrent use.
type Cluster struct {
	pool        *pgxpool.Pool
	id, host    string
	incarnation int64
	lease       time.Duration
	safety      time.Duration // a lease is used locally until lease-safety after it was (re)taken
	workflows   func() []string
	log         *slog.Logger
	clock       func() time.Time

	tickMu sync.Mutex // one Tick at a time

	mu       sync.RWMutex
	held     map[string]heldLease
	live     []string
	replaced bool
	// skew is this host's clock minus the database's at the last
	// heartbeat; skewed: more than MaxClockSkew for sure (see checkClock).
	skew   time.Duration
	skewed bool
	// lastBeat is when (local, monotonic) the last heartbeat was
	// written, upSince the first of the heartbeats since then that
	// followed each other within a lease (see connectedFor).
	lastBeat, upSince time.Time
	lastTick          time.Time
	// gen counts acquisitions; stepGen is gen when the current step began
	// (BeginStep): a step steps only leases taken before it began.
	gen, stepGen uint64

	operator atomic.Bool // see Operator
	stats    counters
}

// heldLease is a lease this process holds, as far as it knows.
type heldLease struct {
	token int64
	// deadline is the local (monotonic) time until which this process
	// may act on the lease: the time it sent the statement that took or
	// renewed it, plus the lease, minus a safety margin. The database's
	// expiry is later than that in real time.
	deadline time.Time
	// bumped: an operator's write on another instance changed the
	// token (see Operator); adopted at the next BeginStep.
	bumped int64
	// gen is the acquisition that took it (see Cluster.gen).
	gen uint64
}

type counters struct {
	renewals, takeOvers, acquired, released, lost, fenced, bumps atomic.Int64
}

// New returns the cluster membership of one instance on pool. Join must
// be called before anything else.
func New(pool *pgxpool.Pool, opts Options) (*Cluster, error) {
	if pool == nil {
		return nil, errors.New("cluster: no database")
	}
	host, _ := os.Hostname()
	if opts.Host == "" {
		opts.Host = host
	}
	if opts.ID == "" {
		opts.ID = host
	}
	if opts.ID == "" {
		return nil, errors.New("cluster: no instance id (and no host name to default to)")
	}
	if opts.Lease == 0 {
		opts.Lease = DefaultLease
	}
	if opts.Lease < MinLease {
		return nil, fmt.Errorf("cluster: lease %s is shorter than the minimum %s", opts.Lease, MinLease)
	}
	if opts.Workflows == nil {
		opts.Workflows = func() []string { return nil }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Cluster{
		pool: pool, id: opts.ID, host: opts.Host,
		incarnation: int64(binary.BigEndian.Uint64(b[:]) >> 1), // positive
		lease:       opts.Lease, safety: opts.Lease / 5,
		workflows: opts.Workflows, clock: opts.Clock,
		log:  opts.Logger.With("instance", opts.ID),
		held: make(map[string]heldLease),
	}, nil
}

// ID is the instance id.
func (c *Cluster) ID() string { return c.id }

// connectedFor is how long this instance has written its heartbeat
// without a gap longer than a lease: how long it has been able to reach
// the database, and so how long another instance's silence can be
// taken for its own (0 if the last heartbeat is more than a lease old).
// After an outage of the database every instance was silent; none may
// judge another by it until it has itself been back for the grace.
func (c *Cluster) connectedFor() time.Duration {
	now := time.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.lastBeat.IsZero() || now.Sub(c.lastBeat) > c.lease {
		return 0
	}
	return now.Sub(c.upSince)
}

// Lease is the lease duration.
func (c *Cluster) Lease() time.Duration { return c.lease }

// Owns reports whether this instance may step workflow wf now: it holds
// the lease, its local deadline has not passed and no operator write on
// another instance changed its token since the current step began. The
// engine asks before a step steps wf and again just before it submits a
// slot of wf (engine.Options.Owns).
func (c *Cluster) Owns(wf string) bool {
	now := time.Now()
	c.mu.RLock()
	l, ok := c.held[wf]
	c.mu.RUnlock()
	return ok && l.bumped == 0 && now.Before(l.deadline)
}

// OwnsFunc is the engine's Options.Owns: Owns, restricted to the leases
// taken before the current step began (BeginStep), whose state the store
// read afresh then. nil for a nil Cluster (one instance: the engine steps
// everything).
func (c *Cluster) OwnsFunc() func(wf string) bool {
	if c == nil {
		return nil
	}
	return func(wf string) bool {
		now := time.Now()
		c.mu.RLock()
		l, ok := c.held[wf]
		stepGen := c.stepGen
		c.mu.RUnlock()
		return ok && l.bumped == 0 && l.gen <= stepGen && now.Before(l.deadline)
	}
}

// Owned lists the workflows this instance holds a usable lease of, sorted.
func (c *Cluster) Owned() []string {
	now := time.Now()
	c.mu.RLock()
	out := make([]string, 0, len(c.held))
	for wf, l := range c.held {
		if l.bumped == 0 && now.Before(l.deadline) {
			out = append(out, wf)
		}
	}
	c.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Live lists the live instances as of the last Tick, sorted.
func (c *Cluster) Live() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append(make([]string, 0, len(c.live)), c.live...) // [] not null in JSON
}

// ClockOffset is this host's clock minus the database's at the last
// heartbeat, and whether it is more than MaxClockSkew for sure (the
// instance then holds no lease until they agree): for /metrics, so that an
// operator sees why an instance steps nothing.
func (c *Cluster) ClockOffset() (off time.Duration, tooFar bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.skew, c.skewed
}

// Stats are the instance's counters since it started.
type Stats struct {
	// Renewals: leases renewed (one per workflow per renewal).
	Renewals int64
	// TakeOvers: leases taken from an expired holder (another instance, or
	// an earlier process under this id, or a lease this one let expire).
	TakeOvers int64
	// Acquired: leases taken that no one held.
	Acquired int64
	// Released: leases given up (the workflow moved to another instance,
	// or shut-down).
	Released int64
	// Lost: leases found expired or taken at renewal.
	Lost int64
	// Fenced: writes refused by Check.
	Fenced int64
	// Bumps: tokens advanced by operator writes (Operator) of this instance.
	Bumps int64
}

// Stats returns the counters.
func (c *Cluster) Stats() Stats {
	s := &c.stats
	return Stats{Renewals: s.renewals.Load(), TakeOvers: s.takeOvers.Load(), Acquired: s.acquired.Load(),
		Released: s.released.Load(), Lost: s.lost.Load(), Fenced: s.fenced.Load(), Bumps: s.bumps.Load()}
}

// Status is what /healthz shows of the instance.
type Status struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	Lease     string    `json:"lease"`
	Live      []string  `json:"live"`
	Owned     []string  `json:"owned"`
	LastTick  time.Time `json:"lastTick,omitzero"`
	Replaced  bool      `json:"replaced,omitempty"`
	Renewals  int64     `json:"leaseRenewals"`
	TakeOvers int64     `json:"takeOvers"`
	Lost      int64     `json:"leasesLost"`
	Fenced    int64     `json:"fencedWrites"`
}

// Status returns the instance's status.
func (c *Cluster) Status() Status {
	st := c.Stats()
	c.mu.RLock()
	last, replaced := c.lastTick, c.replaced
	c.mu.RUnlock()
	return Status{ID: c.id, Host: c.host, Lease: c.lease.String(), Live: c.Live(), Owned: c.Owned(),
		LastTick: last, Replaced: replaced,
		Renewals: st.Renewals, TakeOvers: st.TakeOvers, Lost: st.Lost, Fenced: st.Fenced}
}

// schemaErr turns a missing table into ErrNoSchema, and marks an error
// that says the database cannot be reached scheduler.ErrStoreUnavailable
// (statepg.MarkUnavailable), as the store's own errors are.
func schemaErr(what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "42P02") { // undefined_table, undefined_object
		return fmt.Errorf("cluster: %s: %w: %v", what, ErrNoSchema, err)
	}
	return fmt.Errorf("cluster: %s: %w", what, statepg.MarkUnavailable(err))
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// minRound is the least time a round of statements (a Tick, BeginStep, a
// publication of jobs) is given, however short the lease.
const minRound = 5 * time.Second

// round bounds one round of statements started on their own (Tick,
// BeginStep, Jobs.Publish): a connection that hangs — a backend stopped, a
// network that drops packets without a reset, a lock never granted — ends
// the round with an error after the lease (minRound at least) instead of
// holding the instance for ever. A round that took longer than a lease
// is of no use anyway: the leases it would renew have lapsed.
func (c *Cluster) round(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(c.lease, minRound))
}
