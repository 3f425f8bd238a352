package cluster

// Fencing: Check is statepg.Fence, run inside every write transaction of a
// workflow's state.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Check refuses (an error wrapping ErrFenced) a write transaction that
// touches a workflow this incarnation does not hold under the token it
// knows, or whose lease expired by the database's clock. It locks the
// lease rows it checks (FOR SHARE, in workflow order) until tx ends, so a
// take-over cannot commit between the check and the commit: the write is
// ordered before any later holder's first read.
//
// Inside Operator (an operator's rerun, kill or pause served by this
// instance), a workflow held by another instance is written anyway, and
// its token is advanced in the same transaction: the holder's writes of a
// step that read the state before this one are refused, and its next step
// reads what the operator wrote (see BeginStep).
func (c *Cluster) Check(ctx context.Context, tx pgx.Tx, workflows []string) error {
	wfs := dedupe(workflows)
	if len(wfs) == 0 {
		return nil
	}
	var mine []string
	var tokens []int64
	var others []string
	c.mu.RLock()
	for _, wf := range wfs {
		if l, ok := c.held[wf]; ok && l.bumped == 0 {
			mine = append(mine, wf)
			tokens = append(tokens, l.token)
		} else {
			others = append(others, wf)
		}
	}
	c.mu.RUnlock()
	if len(others) > 0 {
		if !c.operator.Load() {
			return c.fenced(others, "not held by this instance")
		}
		if err := c.bump(ctx, tx, others); err != nil {
			return err
		}
	}
	if len(mine) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `
SELECT l.workflow FROM cluster_leases l
JOIN unnest($1::text[], $2::bigint[]) AS m(workflow, token) ON l.workflow = m.workflow AND l.token = m.token
WHERE l.holder = $3 AND l.incarnation = $4 AND l.expires > clock_timestamp()
ORDER BY l.workflow FOR SHARE OF l`, mine, tokens, c.id, c.incarnation)
	if err != nil {
		return schemaErr("checking leases", err)
	}
	ok, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return schemaErr("checking leases", err)
	}
	if len(ok) == len(mine) {
		return nil
	}
	valid := make(map[string]bool, len(ok))
	for _, wf := range ok {
		valid[wf] = true
	}
	var bad []string
	for _, wf := range mine {
		if !valid[wf] {
			bad = append(bad, wf)
		}
	}
	c.learn(ctx, tx, bad)
	return c.fenced(bad, "lease expired or taken over")
}

// learn finds out why the leases of wfs failed the check, so that Owns
// says so at once (the engine then counts the step's refused changes as
// fenced, not as failed writes): a token advanced by an operator's write
// elsewhere (the lease stays ours; BeginStep adopts the token), or a lease
// lost (dropped).
func (c *Cluster) learn(ctx context.Context, tx pgx.Tx, wfs []string) {
	rows, err := tx.Query(ctx, `SELECT workflow, token FROM cluster_leases
WHERE workflow = ANY($1) AND holder = $2 AND incarnation = $3 AND expires > clock_timestamp()`, wfs, c.id, c.incarnation)
	if err != nil {
		return
	}
	cur, err := collectTokens(rows)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, wf := range wfs {
		l, ok := c.held[wf]
		if !ok {
			continue
		}
		if tok, mine := cur[wf]; mine {
			l.bumped = tok
			c.held[wf] = l
		} else {
			delete(c.held, wf)
			c.stats.lost.Add(1)
		}
	}
}

func (c *Cluster) fenced(wfs []string, why string) error {
	c.stats.fenced.Add(1)
	shown := wfs
	if len(shown) > 3 {
		shown = shown[:3]
	}
	more := ""
	if len(wfs) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(wfs)-len(shown))
	}
	return fmt.Errorf("instance %s, workflow %s%s (%s): %w", c.id, strings.Join(shown, ", "), more, why, ErrFenced)
}

// bump advances the tokens of workflows written by an operator action on
// this instance that it does not hold, creating an expired row for a
// workflow no one holds (so that the lock and the new token also order
// the write before a first acquisition).
func (c *Cluster) bump(ctx context.Context, tx pgx.Tx, wfs []string) error {
	_, err := tx.Exec(ctx, `
INSERT INTO cluster_leases (workflow, holder, incarnation, token, expires, acquired, renewed)
SELECT w, '', 0, nextval('cluster_lease_token'), '-infinity', clock_timestamp(), clock_timestamp()
FROM unnest($1::text[]) AS w ORDER BY w
ON CONFLICT (workflow) DO UPDATE SET token = EXCLUDED.token`, wfs)
	if err != nil {
		return schemaErr("advancing the tokens of "+strings.Join(wfs, ", "), err)
	}
	c.stats.bumps.Add(int64(len(wfs)))
	return nil
}

// Operator runs f, an operator's action (rerun, kill, pause) served by
// this instance, letting its writes through the fence for workflows
// another instance holds (see Check). The caller must make sure no step of
// this instance runs meanwhile (the server serializes them).
func (c *Cluster) Operator(f func() error) error {
	c.operator.Store(true)
	defer c.operator.Store(false)
	return f()
}

// BeginStep marks the beginning of a step: it reads the tokens of the
// leases this incarnation holds (one query) and adopts those that
// operators' writes on other instances advanced (see Check), drops those
// taken over, and makes the step (OwnsFunc) step the leases held now, not
// those taken while it runs. The caller must call it before each step,
// with no other step running, and then bring the store's view of the
// workflows up to date (statepg's Refresh) before the step reads them: a
// workflow taken over or written by an operator elsewhere changed. It is
// bounded (see round) even when ctx is not: a step is never held for ever
// by a hung connection.
func (c *Cluster) BeginStep(ctx context.Context) error {
	ctx, cancel := c.round(ctx)
	defer cancel()
	rows, err := c.pool.Query(ctx, `SELECT workflow, token FROM cluster_leases
WHERE holder = $1 AND incarnation = $2 AND expires > clock_timestamp()`, c.id, c.incarnation)
	if err != nil {
		return schemaErr("reading this instance's leases", err)
	}
	cur, err := collectTokens(rows)
	if err != nil {
		return schemaErr("reading this instance's leases", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stepGen = c.gen
	lost := 0
	for wf, l := range c.held {
		tok, ok := cur[wf]
		switch {
		case !ok:
			delete(c.held, wf)
			lost++
		case tok != l.token:
			l.token, l.bumped = tok, 0
			c.held[wf] = l
		case l.bumped != 0:
			l.bumped = 0
			c.held[wf] = l
		}
	}
	c.stats.lost.Add(int64(lost))
	return nil
}

// Deadline returns until when (local clock) this instance may act on wf's
// lease, and false if it holds none usable.
func (c *Cluster) Deadline(wf string) (time.Time, bool) {
	c.mu.RLock()
	l, ok := c.held[wf]
	c.mu.RUnlock()
	if !ok || l.bumped != 0 || !time.Now().Before(l.deadline) {
		return time.Time{}, false
	}
	return l.deadline, true
}

func dedupe(wfs []string) []string {
	out := append([]string(nil), wfs...)
	sort.Strings(out)
	j := 0
	for i, wf := range out {
		if i == 0 || wf != out[j-1] {
			out[j] = wf
			j++
		}
	}
	return out[:j]
}
