package statepg

// The in-memory index: loading workflows, following this instance's
// writes, refreshing after another instance's.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// loadChunk is how many workflows one load reads together.
const loadChunk = 500

// loadBackoff is how long after a failed load the reads of workflows not
// loaded fail at once with its error, instead of each waiting for the
// database again (a step over 1,000 workflows while the server is down
// would otherwise wait for 1,000 connect timeouts).
const loadBackoff = 5 * time.Second

// validWorkflow checks a workflow id by the rules every store applies
// (store.CheckWorkflow), so that any state can be exported back to a
// directory.
func validWorkflow(id string) error { return store.CheckWorkflow(id) }

// read calls fn with workflow wf's index, loading it first if needed; fn
// runs with db.mu held.
func (db *DB) read(wf string, fn func(ix *wfIndex)) error {
	if err := validWorkflow(wf); err != nil {
		return err
	}
	for range 3 {
		db.mu.Lock()
		if db.closed {
			db.mu.Unlock()
			return errClosed
		}
		if ix := db.wfs[wf]; ix != nil {
			fn(ix)
			db.mu.Unlock()
			return nil
		}
		if err := db.loadFailed; err != nil && time.Since(db.loadFailedAt) < loadBackoff {
			db.mu.Unlock()
			return err
		}
		db.mu.Unlock()
		db.wmu.Lock()
		err := db.loadLocked([]string{wf})
		db.wmu.Unlock()
		db.mu.Lock()
		db.loadFailed, db.loadFailedAt = err, time.Now()
		db.mu.Unlock()
		if err != nil {
			return err
		}
		// Loaded; dropped again only if a write failed in between: retry.
	}
	return fmt.Errorf("PostgreSQL state store: workflow %s: its index keeps being invalidated", wf)
}

// Preload reads the indexes of the named workflows not loaded yet, a
// chunk of workflows per query (a server calls it before its first step).
// workers is ignored: one query reads a whole chunk. A workflow that fails
// to load is left to fail on first use.
func (db *DB) Preload(wfs []string, workers int) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	_ = db.loadLocked(wfs)
}

// loadLocked loads the indexes of those of wfs that are valid and not
// loaded; db.wmu is held (no write of this instance runs meanwhile).
func (db *DB) loadLocked(wfs []string) error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return errClosed
	}
	var todo []string
	for _, wf := range wfs {
		if db.wfs[wf] == nil && validWorkflow(wf) == nil {
			todo = append(todo, wf)
		}
	}
	db.mu.Unlock()
	for len(todo) > 0 {
		n := min(len(todo), loadChunk)
		ixs, err := db.fetch(todo[:n])
		if err != nil {
			return fmt.Errorf("PostgreSQL state store: read the state of %d workflows (%s, ...): %w", n, todo[0], pgError(err))
		}
		db.mu.Lock()
		for wf, ix := range ixs {
			if db.wfs[wf] == nil {
				db.wfs[wf] = ix
			}
		}
		db.mu.Unlock()
		todo = todo[n:]
	}
	return nil
}

// fetch reads the records of wfs in one repeatable-read transaction (one
// snapshot: the version read is that of the rows read).
func (db *DB) fetch(wfs []string) (map[string]*wfIndex, error) {
	ctx, cancel := db.ctx()
	defer cancel()
	out := make(map[string]*wfIndex, len(wfs))
	for _, wf := range wfs {
		out[wf] = newIndex()
	}
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("SELECT workflow, version FROM celos_workflows WHERE workflow = ANY($1)", wfs)
		b.Queue("SELECT workflow, slot_time, status, external_id, retry_count FROM celos_slots WHERE workflow = ANY($1)", wfs)
		b.Queue("SELECT workflow, slot_time, marked_at FROM celos_rerun_marks WHERE workflow = ANY($1)", wfs)
		b.Queue("SELECT workflow, slot_time, attempt, intended_at FROM celos_intents WHERE workflow = ANY($1)", wfs)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		var (
			wf     string
			t, at  time.Time
			v      int64
			status string
			r      rec
			n      int64
		)
		scan := func(dest []any, use func()) error {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			_, err = pgx.ForEachRow(rows, dest, func() error { use(); n++; return nil })
			return err
		}
		if err := scan([]any{&wf, &v}, func() { out[wf].version = v }); err != nil {
			return err
		}
		if err := scan([]any{&wf, &t, &status, &r.ext, &r.retry}, func() {
			r.status = statusOf(status)
			out[wf].setRec(key(t), r)
		}); err != nil {
			return err
		}
		if err := scan([]any{&wf, &t, &at}, func() { out[wf].reruns[key(t)] = at.UTC() }); err != nil {
			return err
		}
		var in store.Intent
		if err := scan([]any{&wf, &t, &in.Attempt, &at}, func() {
			in.Time = at.UTC()
			out[wf].intents[key(t)] = in
		}); err != nil {
			return err
		}
		db.reads.Add(n)
		return br.Close()
	})
	return out, err
}

// statusOf returns the slot.Status constant named s (one string shared by
// every record, not one per row).
func statusOf(s string) slot.Status {
	for _, st := range slot.Statuses {
		if string(st) == s {
			return st
		}
	}
	return slot.Status(s)
}

// checkFence refuses, inside tx, a write of workflows wfs this instance
// no longer holds the lease of (ErrFenced, counted); without a fence (one
// instance) it allows every write.
func (db *DB) checkFence(ctx context.Context, tx pgx.Tx, wfs []string) error {
	if db.fence == nil {
		return nil
	}
	err := db.fence.Check(ctx, tx, wfs)
	if errors.Is(err, ErrFenced) {
		db.fenced.Add(1)
	}
	return err
}

// writeTx runs fn in one transaction that also checks the fence for wfs
// and bumps their versions, and commits it; db.wmu is held. It returns the
// versions after the write. On error nothing of the transaction is
// committed and the indexes stay as they were — unless the commit itself
// failed (a lost connection: the outcome is unknown), when the indexes of
// wfs are dropped, to be read again.
func (db *DB) writeTx(what string, wfs []string, fn func(ctx context.Context, tx pgx.Tx) (int64, error)) (map[string]int64, error) {
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	wfs = sortedUnique(wfs)
	ctx, cancel := db.ctx()
	defer cancel()
	versions := make(map[string]int64, len(wfs))
	fail := func(err error) (map[string]int64, error) {
		return nil, fmt.Errorf("PostgreSQL state store: %s: %w", what, pgError(err))
	}
	// READ COMMITTED whatever the database's default_transaction_isolation:
	// the admission of pool intents (admitPools) counts what committed
	// before its lock was granted, which a snapshot taken at the
	// transaction's first statement would not show.
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback(context.Background()) // after Commit: a no-op
	if err := db.checkFence(ctx, tx, wfs); err != nil {
		return fail(err)
	}
	rows, err := fn(ctx, tx)
	if err != nil {
		return fail(err)
	}
	if err := bumpVersions(ctx, tx, wfs, versions); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		db.forget(wfs)
		return fail(err)
	}
	db.writes.Add(rows)
	return versions, nil
}

// bumpVersions increments the versions of wfs (creating their rows) and
// records the new ones in out. wfs is sorted: two instances lock the rows
// in the same order.
func bumpVersions(ctx context.Context, tx pgx.Tx, wfs []string, out map[string]int64) error {
	if len(wfs) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `INSERT INTO celos_workflows AS w (workflow, version)
SELECT unnest($1::text[]), 1
ON CONFLICT (workflow) DO UPDATE SET version = w.version + 1
RETURNING workflow, version`, wfs)
	if err != nil {
		return err
	}
	var wf string
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&wf, &v}, func() error { out[wf] = v; return nil })
	return err
}

// follow applies a committed write to the loaded indexes of the workflows
// it bumped: apply runs for each one this instance's index was current
// for; an index that missed another instance's write is dropped instead.
func (db *DB) follow(versions map[string]int64, apply func(wf string, ix *wfIndex)) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for wf, v := range versions {
		ix := db.wfs[wf]
		if ix == nil {
			continue
		}
		if ix.version+1 != v {
			delete(db.wfs, wf)
			continue
		}
		ix.version = v
		apply(wf, ix)
	}
}

// forget drops the indexes of wfs: they are read again on next use.
func (db *DB) forget(wfs []string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, wf := range wfs {
		delete(db.wfs, wf)
	}
}

// Reload drops every index and reads the paused flags again (POST
// /clear-cache): everything is read from the database on next use.
func (db *DB) Reload() error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	db.mu.Lock()
	db.wfs = make(map[string]*wfIndex)
	db.mu.Unlock()
	db.forgetProblems()
	ctx, cancel := db.ctx()
	defer cancel()
	if err := db.loadPaused(ctx); err != nil {
		return fmt.Errorf("PostgreSQL state store: read paused flags: %w", err)
	}
	return nil
}

// Refresh brings the indexes up to date with writes made by other
// instances, in one query, and returns how many it dropped: every loaded
// workflow whose version in the database is not the index's is dropped
// (read again on next use), and the paused flags of the workflows written
// are read again. Like every call of the store it ends within the call
// timeout (Options.OpTimeout), whatever ctx.
//
// It reads only the rows of celos_workflows written since the previous
// Refresh (or Open), not every workflow's: those stamped (changed_by, a
// trigger, migration 0003) by a transaction that the previous Refresh's
// snapshot did not see. Such a transaction has an id at or above that
// snapshot's xmin — it was running then, or began later — whatever the
// order in which transactions commit, so none is skipped; a transaction
// still running at one Refresh is read by the next one after it commits.
// Rows of transactions already seen are read again while an older
// transaction is open (a long writer holds xmin back): more rows, never
// fewer.
//
// Every write of a workflow's records bumps its row in the same
// transaction (writeTx), so a workflow whose row is not read has not
// changed since the previous Refresh, and an index that was current then,
// or was loaded later, is current now. Rows are never deleted while
// instances run (a TRUNCATE or a restore needs POST /clear-cache or a
// restart); should the server's transaction ids go backwards (another
// server put under a running instance), Refresh drops every index and
// reads every paused flag.
func (db *DB) Refresh(ctx context.Context) (int, error) {
	// Bounded as every call of the store is, even when ctx is not (a
	// step's): a hung connection fails the Refresh, not the server.
	ctx, cancel := context.WithTimeout(ctx, db.timeout)
	defer cancel()
	db.wmu.Lock()
	defer db.wmu.Unlock()
	// The third part reads the problems published since (problems.go),
	// all of them on the first Refresh.
	allProblems := !db.probs.isFull()
	problemsSince := "p.changed_by >= $1::text::xid8"
	if allProblems {
		problemsSince = "true"
	}
	rows, err := db.pool.Query(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text, NULL::text, NULL::bigint, NULL::boolean, NULL::text
UNION ALL
SELECT NULL, w.workflow, w.version, EXISTS (SELECT 1 FROM celos_paused p WHERE p.workflow = w.workflow), NULL
FROM celos_workflows w WHERE w.changed_by >= $1::text::xid8
UNION ALL
SELECT NULL, p.workflow, NULL, NULL, p.problems::text FROM celos_problems p WHERE `+problemsSince, strconv.FormatUint(db.since, 10))
	if err != nil {
		return 0, fmt.Errorf("PostgreSQL state store: refresh: %w", pgError(err))
	}
	type row struct {
		version int64
		paused  bool
	}
	var (
		cur   []string
		vals  []row
		xmin  *string
		wf    *string
		v     *int64
		p     *bool
		doc   *string
		since uint64
		probs = make(map[string][]scheduler.Problem)
	)
	_, err = pgx.ForEachRow(rows, []any{&xmin, &wf, &v, &p, &doc}, func() error {
		switch {
		case xmin != nil:
			var err error
			since, err = strconv.ParseUint(*xmin, 10, 64)
			return err
		case doc != nil:
			probs[*wf] = decodeProblems(*wf, *doc)
		default:
			cur, vals = append(cur, *wf), append(vals, row{*v, *p})
		}
		return nil
	})
	if err == nil && since == 0 {
		err = errors.New("the server returned no snapshot")
	}
	if err != nil {
		return 0, fmt.Errorf("PostgreSQL state store: refresh: %w", pgError(err))
	}
	db.reads.Add(int64(len(cur) + len(probs)))
	if since < db.since {
		n := db.dropAll()
		if err := db.loadPaused(ctx); err != nil {
			return n, fmt.Errorf("PostgreSQL state store: refresh paused flags: %w", err)
		}
		if err := db.readAllProblems(ctx); err != nil {
			return n, fmt.Errorf("PostgreSQL state store: refresh the published problems: %w", pgError(err))
		}
		db.since = since
		return n, nil
	}
	db.probs.apply(probs, allProblems)
	n := 0
	db.mu.Lock()
	for i, wf := range cur {
		if ix := db.wfs[wf]; ix != nil && ix.version != vals[i].version {
			delete(db.wfs, wf)
			n++
		}
		if vals[i].paused {
			db.paused[wf] = true
		} else {
			delete(db.paused, wf)
		}
	}
	db.mu.Unlock()
	db.since = since
	return n, nil
}

// dropAll drops every index and returns how many there were.
func (db *DB) dropAll() int {
	db.mu.Lock()
	defer db.mu.Unlock()
	n := len(db.wfs)
	db.wfs = make(map[string]*wfIndex)
	return n
}

// startSince records the xmin of a snapshot taken now as the point the
// first Refresh reads from: no index is loaded yet, and every one loaded
// later is read after it. db.wmu is held, or db is not shared yet.
func (db *DB) startSince(ctx context.Context) error {
	var xmin string
	if err := db.pool.QueryRow(ctx, "SELECT pg_snapshot_xmin(pg_current_snapshot())::text").Scan(&xmin); err != nil {
		return pgError(err)
	}
	v, err := strconv.ParseUint(xmin, 10, 64)
	if err != nil {
		return fmt.Errorf("the server's snapshot xmin %q: %w", xmin, err)
	}
	db.since = v
	return nil
}

func sortedUnique(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	j := 0
	for i, v := range out {
		if i == 0 || v != out[j-1] {
			out[j] = v
			j++
		}
	}
	return out[:j]
}
