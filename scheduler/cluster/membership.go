package cluster

// The instance row: joining, the heartbeat, the periodic tick and leaving.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// Join records the instance (heartbeat row, a new incarnation). If another
// live process runs under the same id (its heartbeat younger than its
// lease and not stopped), Join waits for that row to go stale — a process
// restarted after a crash gets its id back within a lease — and returns an
// error wrapping ErrInstanceInUse when ctx ends first.
func (c *Cluster) Join(ctx context.Context) error {
	for waited := false; ; waited = true {
		var got string
		sent := time.Now()
		err := c.pool.QueryRow(ctx, `
INSERT INTO cluster_instances (id, incarnation, host, pid, lease_ms, started, heartbeat, stopped)
VALUES ($1, $2, $3, $4, $5, clock_timestamp(), clock_timestamp(), false)
ON CONFLICT (id) DO UPDATE SET incarnation = EXCLUDED.incarnation, host = EXCLUDED.host,
    pid = EXCLUDED.pid, lease_ms = EXCLUDED.lease_ms, started = EXCLUDED.started,
    heartbeat = EXCLUDED.heartbeat, stopped = false
WHERE cluster_instances.stopped
   OR cluster_instances.heartbeat <= clock_timestamp() - cluster_instances.lease_ms * interval '1 millisecond'
RETURNING id`, c.id, c.incarnation, c.host, os.Getpid(), ms(c.lease)).Scan(&got)
		if err == nil {
			c.beat(sent)
			c.log.Info("joined the cluster", "host", c.host, "lease", c.lease.String())
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return schemaErr("joining as instance "+c.id, err)
		}
		var host string
		var pid int
		var age float64
		qerr := c.pool.QueryRow(ctx, `SELECT host, pid, extract(epoch FROM clock_timestamp() - heartbeat)
FROM cluster_instances WHERE id = $1`, c.id).Scan(&host, &pid, &age)
		inUse := fmt.Errorf("cluster: joining as instance %q: %w (host %s, pid %d, last heartbeat %.1fs ago)", c.id, ErrInstanceInUse, host, pid, age)
		if qerr != nil {
			inUse = fmt.Errorf("cluster: joining as instance %q: %w", c.id, ErrInstanceInUse)
		}
		select {
		case <-ctx.Done():
			return inUse
		case <-time.After(c.lease / 4):
		}
		if !waited {
			c.log.Warn("waiting for the previous process of this instance id to go stale", "error", inUse)
		}
	}
}

// Run ticks every Lease/3 until ctx ends, then leaves the cluster (Leave
// with a fresh few-second context). Each Tick is bounded (see round): a
// hung connection fails it rather than stopping the renewals for ever.
// Tick errors are logged: the instance keeps the leases it could renew
// and acts on none past their deadline.
func (c *Cluster) Run(ctx context.Context) error {
	t := time.NewTicker(c.lease / 3)
	defer t.Stop()
	for {
		tctx, cancel := c.round(ctx)
		err := c.Tick(tctx)
		cancel()
		if err != nil {
			if errors.Is(err, ErrReplaced) {
				return err
			}
			if ctx.Err() == nil {
				c.log.Warn("cluster tick failed; retrying", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return c.Leave(lctx)
		case <-t.C:
		}
	}
}

// Tick does one round: heartbeat, renewal of the leases held, membership,
// then gives up the leases of workflows that now hash to another live
// instance and takes those that hash to this one (taking over an expired
// lease, never a live one). A database error ends the round; the leases
// it renewed before stay usable until their deadlines.
func (c *Cluster) Tick(ctx context.Context) error {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	if c.isReplaced() {
		return fmt.Errorf("cluster: instance %q: %w", c.id, ErrReplaced)
	}
	if err := c.heartbeat(ctx); err != nil {
		return err
	}
	if err := c.renew(ctx); err != nil {
		return err
	}
	live, err := c.members(ctx)
	if err != nil {
		return err
	}
	want := make(map[string]bool)
	for _, wf := range c.workflows() {
		if Owner(wf, live) == c.id {
			want[wf] = true
		}
	}
	var give, take []string
	c.mu.Lock()
	c.live = live
	for wf := range c.held {
		if !want[wf] {
			give = append(give, wf)
			delete(c.held, wf) // Owns is false from here on
		}
	}
	for wf := range want {
		if _, ok := c.held[wf]; !ok {
			take = append(take, wf)
		}
	}
	c.mu.Unlock()
	if err := c.release(ctx, give); err != nil {
		return err
	}
	if err := c.acquire(ctx, take); err != nil {
		return err
	}
	c.mu.Lock()
	c.lastTick = time.Now()
	c.mu.Unlock()
	return nil
}

func (c *Cluster) isReplaced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.replaced
}

// heartbeat refreshes the instance row. If the row names another
// incarnation, a newer process took the id: this one drops every lease.
//
// It also compares this host's clock with the database's (checkClock): an
// instance whose clock is off by more than MaxClockSkew marks itself
// stopped (the others do not count it live, and step its share), gives
// up every lease and returns an error wrapping ErrClockSkew; it joins
// again at the first heartbeat that finds the clocks agree.
func (c *Cluster) heartbeat(ctx context.Context) error {
	var db time.Time
	sent, t0 := time.Now(), c.clock()
	err := c.pool.QueryRow(ctx, `UPDATE cluster_instances SET heartbeat = clock_timestamp(), stopped = false
WHERE id = $1 AND incarnation = $2 RETURNING clock_timestamp()`, c.id, c.incarnation).Scan(&db)
	t1 := c.clock()
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return schemaErr("heartbeat", err)
	}
	if err == nil {
		if skewErr := c.checkClock(t0, t1, db); skewErr != nil {
			return c.standAside(ctx, skewErr)
		}
		c.beat(sent)
		return nil
	}
	c.mu.Lock()
	c.replaced = true
	n := len(c.held)
	clear(c.held)
	c.mu.Unlock()
	c.stats.lost.Add(int64(n))
	c.log.Error("another process took over this instance id; giving up every lease", "leases", n)
	return fmt.Errorf("cluster: instance %q: %w", c.id, ErrReplaced)
}

// beat records a heartbeat sent at sent (see connectedFor).
func (c *Cluster) beat(sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastBeat.IsZero() || sent.Sub(c.lastBeat) > c.lease {
		c.upSince = sent
	}
	c.lastBeat = sent
}

// checkClock records the offset of this host's clock from the database's,
// read (db) by a statement sent at t0 and answered at t1 (this host's
// clock), and returns an error wrapping ErrClockSkew when it is more than
// MaxClockSkew whatever the statement's latency.
func (c *Cluster) checkClock(t0, t1, db time.Time) error {
	rtt := max(t1.Sub(t0), 0)
	off := t0.Add(rtt / 2).Sub(db)
	dist := off.Abs()
	bad := dist-rtt/2 > MaxClockSkew
	c.mu.Lock()
	c.skew, c.skewed = off, bad
	c.mu.Unlock()
	if !bad {
		return nil
	}
	side := "ahead of"
	if off < 0 {
		side = "behind"
	}
	return fmt.Errorf("cluster: instance %q: %w: it is %s %s the database's (at most %s allowed); this instance steps no workflow until they agree (check NTP on both hosts)",
		c.id, ErrClockSkew, dist.Round(100*time.Millisecond), side, MaxClockSkew)
}

// standAside is the heartbeat of an instance whose clock is off (why):
// the instance row is marked stopped and every lease given up.
func (c *Cluster) standAside(ctx context.Context, why error) error {
	c.mu.Lock()
	give := make([]string, 0, len(c.held))
	for wf := range c.held {
		give = append(give, wf)
	}
	clear(c.held) // Owns is false from here on
	c.mu.Unlock()
	if len(give) > 0 {
		c.log.Error("giving up every lease: this host's clock is off the database's", "leases", len(give), "error", why)
	}
	if _, err := c.pool.Exec(ctx, `UPDATE cluster_instances SET stopped = true WHERE id = $1 AND incarnation = $2`, c.id, c.incarnation); err != nil {
		return errors.Join(why, schemaErr("marking the instance stopped", err))
	}
	if err := c.release(ctx, give); err != nil {
		return errors.Join(why, err)
	}
	return why
}

// members lists the live instances: heartbeat younger than their lease,
// not stopped.
func (c *Cluster) members(ctx context.Context) ([]string, error) {
	rows, err := c.pool.Query(ctx, `SELECT id FROM cluster_instances
WHERE NOT stopped AND heartbeat > clock_timestamp() - lease_ms * interval '1 millisecond' ORDER BY id`)
	if err != nil {
		return nil, schemaErr("listing live instances", err)
	}
	live, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, schemaErr("listing live instances", err)
	}
	return live, nil
}

// Leave releases every lease and marks the instance stopped, so that the
// others take its workflows at their next tick instead of after a lease.
// Command jobs it started keep their rows; their host's heartbeat stops,
// so they are declared lost after the grace unless it comes back.
func (c *Cluster) Leave(ctx context.Context) error {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	c.mu.Lock()
	give := make([]string, 0, len(c.held))
	for wf := range c.held {
		give = append(give, wf)
	}
	clear(c.held)
	c.mu.Unlock()
	err := c.release(ctx, give)
	if _, serr := c.pool.Exec(ctx, `UPDATE cluster_instances SET stopped = true, heartbeat = clock_timestamp()
WHERE id = $1 AND incarnation = $2`, c.id, c.incarnation); serr != nil && err == nil {
		err = schemaErr("marking the instance stopped", serr)
	}
	if err == nil {
		c.log.Info("left the cluster", "released", len(give))
	}
	return err
}
