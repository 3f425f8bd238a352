package cluster

// Leases: renewal, release, acquisition and take-over. Each is one
// statement whatever the number of workflows; rows are locked in workflow
// order (as Check locks them) so that two statements never deadlock.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// renew extends every lease this incarnation holds that has not expired,
// and learns which it lost (expired, or taken over after expiring).
func (c *Cluster) renew(ctx context.Context) error {
	t0 := time.Now()
	rows, err := c.pool.Query(ctx, `
WITH mine AS (
    SELECT workflow FROM cluster_leases
    WHERE holder = $1 AND incarnation = $2 AND expires > clock_timestamp()
    ORDER BY workflow FOR UPDATE)
UPDATE cluster_leases l SET expires = clock_timestamp() + $3 * interval '1 millisecond', renewed = clock_timestamp()
FROM mine WHERE l.workflow = mine.workflow
RETURNING l.workflow, l.token`, c.id, c.incarnation, ms(c.lease))
	if err != nil {
		return schemaErr("renewing leases", err)
	}
	got, err := collectTokens(rows)
	if err != nil {
		return schemaErr("renewing leases", err)
	}
	deadline := t0.Add(c.lease - c.safety)
	var lost []string
	c.mu.Lock()
	for wf, l := range c.held {
		tok, ok := got[wf]
		switch {
		case !ok:
			lost = append(lost, wf)
			delete(c.held, wf)
		case tok != l.token:
			// An operator's write on another instance advanced the
			// token (Operator): the workflow stays ours, but the step in
			// progress read what that write changed; the new token is
			// used from the next step on (BeginStep).
			l.bumped, l.deadline = tok, deadline
			c.held[wf] = l
		default:
			l.deadline = deadline
			c.held[wf] = l
		}
	}
	c.mu.Unlock()
	c.stats.renewals.Add(int64(len(got)))
	if len(lost) > 0 {
		c.stats.lost.Add(int64(len(lost)))
		c.log.Warn("leases lost (expired before renewal, or taken over)", "workflows", len(lost), "first", lost[0])
	}
	return nil
}

// release gives up leases (deletes their rows); the caller already
// removed them from held.
func (c *Cluster) release(ctx context.Context, wfs []string) error {
	if len(wfs) == 0 {
		return nil
	}
	tag, err := c.pool.Exec(ctx, `
DELETE FROM cluster_leases WHERE workflow IN (
    SELECT workflow FROM cluster_leases
    WHERE holder = $1 AND incarnation = $2 AND workflow = ANY($3)
    ORDER BY workflow FOR UPDATE)`, c.id, c.incarnation, wfs)
	if err != nil {
		return schemaErr("releasing leases", err)
	}
	c.stats.released.Add(tag.RowsAffected())
	return nil
}

// acquire takes the leases of wfs that are free (no row) or expired (a
// take-over: the previous holder missed its renewals), each with a new
// token. Leases held by a live holder are left alone: that holder gives
// them up at its next tick, and this instance takes them at a later one.
func (c *Cluster) acquire(ctx context.Context, wfs []string) error {
	if len(wfs) == 0 {
		return nil
	}
	t0 := time.Now()
	rows, err := c.pool.Query(ctx, `
WITH expired AS (
    SELECT workflow FROM cluster_leases
    WHERE workflow = ANY($4) AND expires <= clock_timestamp()
    ORDER BY workflow FOR UPDATE)
UPDATE cluster_leases l SET holder = $1, incarnation = $2, token = nextval('cluster_lease_token'),
    expires = clock_timestamp() + $3 * interval '1 millisecond', acquired = clock_timestamp(), renewed = clock_timestamp()
FROM expired WHERE l.workflow = expired.workflow
RETURNING l.workflow, l.token`, c.id, c.incarnation, ms(c.lease), wfs)
	if err != nil {
		return schemaErr("taking over expired leases", err)
	}
	taken, err := collectTokens(rows)
	if err != nil {
		return schemaErr("taking over expired leases", err)
	}
	rows, err = c.pool.Query(ctx, `
INSERT INTO cluster_leases (workflow, holder, incarnation, token, expires, acquired, renewed)
SELECT w, $1, $2, nextval('cluster_lease_token'), clock_timestamp() + $3 * interval '1 millisecond',
    clock_timestamp(), clock_timestamp()
FROM unnest($4::text[]) AS w ORDER BY w
ON CONFLICT (workflow) DO NOTHING
RETURNING workflow, token`, c.id, c.incarnation, ms(c.lease), wfs)
	if err != nil {
		return schemaErr("acquiring leases", err)
	}
	fresh, err := collectTokens(rows)
	if err != nil {
		return schemaErr("acquiring leases", err)
	}
	deadline := t0.Add(c.lease - c.safety)
	c.mu.Lock()
	c.gen++
	for wf, tok := range taken {
		c.held[wf] = heldLease{token: tok, deadline: deadline, gen: c.gen}
	}
	for wf, tok := range fresh {
		c.held[wf] = heldLease{token: tok, deadline: deadline, gen: c.gen}
	}
	c.mu.Unlock()
	c.stats.takeOvers.Add(int64(len(taken)))
	c.stats.acquired.Add(int64(len(fresh)))
	if len(taken) > 0 {
		c.log.Info("took over expired leases", "workflows", len(taken))
	}
	return nil
}

func collectTokens(rows pgx.Rows) (map[string]int64, error) {
	out := make(map[string]int64)
	var wf string
	var tok int64
	_, err := pgx.ForEachRow(rows, []any{&wf, &tok}, func() error {
		out[wf] = tok
		return nil
	})
	return out, err
}
