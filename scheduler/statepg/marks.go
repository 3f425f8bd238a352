package statepg

// Rerun markers, submit intents, paused flags and workflow owners.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// RerunMarks returns the rerun markers of workflow wf, oldest slot first.
func (db *DB) RerunMarks(wf string) ([]store.RerunMark, error) {
	var out []store.RerunMark
	err := db.read(wf, func(ix *wfIndex) {
		if len(ix.reruns) == 0 {
			return
		}
		out = make([]store.RerunMark, 0, len(ix.reruns))
		for k, at := range ix.reruns {
			out = append(out, store.RerunMark{Slot: keyTime(k), At: at})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Slot.Before(out[j].Slot) })
	return out, err
}

// MarkRerun writes a rerun marker for the slot, stamped with at (to the
// millisecond, as the file store keeps it).
func (db *DB) MarkRerun(id slot.ID, at time.Time) error {
	if err := validWorkflow(id.Workflow); err != nil {
		return err
	}
	t, at := ms(id.Time), ms(at)
	return db.slotWrite("mark "+id.String()+" for rerun", id.Workflow,
		func(ctx context.Context, tx pgx.Tx) (int64, error) {
			tag, err := tx.Exec(ctx, `INSERT INTO celos_rerun_marks (workflow, slot_time, marked_at) VALUES ($1, $2, $3)
ON CONFLICT (workflow, slot_time) DO UPDATE SET marked_at = excluded.marked_at`, id.Workflow, t, at)
			return tag.RowsAffected(), err
		},
		func(ix *wfIndex) { ix.reruns[key(t)] = at })
}

// UnmarkRerun removes a slot's rerun marker, if any.
func (db *DB) UnmarkRerun(id slot.ID) error {
	if err := validWorkflow(id.Workflow); err != nil {
		return err
	}
	k := key(id.Time)
	has := false
	if err := db.read(id.Workflow, func(ix *wfIndex) { _, has = ix.reruns[k] }); err != nil || !has {
		return err
	}
	return db.slotWrite("unmark rerun of "+id.String(), id.Workflow,
		func(ctx context.Context, tx pgx.Tx) (int64, error) {
			tag, err := tx.Exec(ctx, "DELETE FROM celos_rerun_marks WHERE workflow = $1 AND slot_time = $2", id.Workflow, keyTime(k))
			return tag.RowsAffected(), err
		},
		func(ix *wfIndex) { delete(ix.reruns, k) })
}

// slotWrite runs one write of workflow wf's records and applies it to the
// index.
func (db *DB) slotWrite(what, wf string, fn func(ctx context.Context, tx pgx.Tx) (int64, error), apply func(ix *wfIndex)) error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	versions, err := db.writeTx(what, []string{wf}, fn)
	if err != nil {
		return err
	}
	db.follow(versions, func(_ string, ix *wfIndex) { apply(ix) })
	return nil
}

// GetIntent returns a slot's submit intent, if one was left.
func (db *DB) GetIntent(id slot.ID) (in store.Intent, ok bool, err error) {
	err = db.read(id.Workflow, func(ix *wfIndex) { in, ok = ix.intents[key(id.Time)] })
	return in, ok, err
}

// PutIntent records one submit intent.
func (db *DB) PutIntent(id slot.ID, in store.Intent) error {
	for _, err := range db.PutIntents(map[slot.ID]store.Intent{id: in}) {
		return err
	}
	return nil
}

// PutIntents records submit intents in one transaction, durable when it
// returns; when it fails, every one of them is returned with the error.
// Intents of pool workflows (store.Intent.Pool) are admitted within their
// pools' limits across every instance on the database, in the same
// transaction (admitPools); those the pool has no room for are returned
// with an error wrapping store.ErrPoolFull and not recorded.
func (db *DB) PutIntents(ins map[slot.ID]store.Intent) map[slot.ID]error {
	failed := make(map[slot.ID]error)
	var (
		wfs      []string
		ts, ats  []time.Time
		attempts []int32
		ids      []slot.ID
		claims   []*store.PoolClaim // nil: none of them is of a pool
	)
	for id, in := range ins {
		if in.Pool != nil && claims == nil {
			claims = make([]*store.PoolClaim, len(ids), len(ins))
		}
		if err := validWorkflow(id.Workflow); err != nil {
			failed[id] = err
			continue
		}
		ids = append(ids, id)
		if claims != nil {
			claims = append(claims, in.Pool)
		}
		wfs, ts, ats, attempts = append(wfs, id.Workflow), append(ts, ms(id.Time)), append(ats, ms(in.Time)), append(attempts, int32(in.Attempt))
	}
	if len(ids) > 0 {
		db.wmu.Lock()
		var refused map[int]error // the intents a pool refused, by index
		versions, err := db.writeTx(fmt.Sprintf("record %d submit intents (%s, ...)", len(ids), ids[0]), wfs,
			func(ctx context.Context, tx pgx.Tx) (int64, error) {
				var err error
				if refused, err = admitPools(ctx, tx, wfs, ts, claims); err != nil {
					return 0, err
				}
				w, t, a, at := wfs, ts, attempts, ats
				if len(refused) > 0 {
					admitted := make([]int, 0, len(ids))
					for i := range ids {
						if refused[i] == nil {
							admitted = append(admitted, i)
						}
					}
					if len(admitted) == 0 {
						return 0, nil
					}
					w, t, a, at = pick(wfs, admitted), pick(ts, admitted), pick(attempts, admitted), pick(ats, admitted)
				}
				tag, err := tx.Exec(ctx, `INSERT INTO celos_intents (workflow, slot_time, attempt, intended_at)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::int[], $4::timestamptz[])
ON CONFLICT (workflow, slot_time) DO UPDATE SET attempt = excluded.attempt, intended_at = excluded.intended_at`, w, t, a, at)
				return tag.RowsAffected(), err
			})
		if err != nil {
			for _, id := range ids {
				failed[id] = err
			}
		} else {
			for i, err := range refused {
				failed[ids[i]] = err
			}
			byWf := indexesByWorkflow(wfs)
			db.follow(versions, func(wf string, ix *wfIndex) {
				for _, i := range byWf[wf] {
					if refused[i] == nil {
						ix.intents[key(ts[i])] = store.Intent{Attempt: int(attempts[i]), Time: ats[i]}
					}
				}
			})
		}
		db.wmu.Unlock()
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// pick returns the elements of s at idx.
func pick[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = s[i]
	}
	return out
}

// DeleteIntent removes a slot's submit intent, if any.
func (db *DB) DeleteIntent(id slot.ID) error { return db.DeleteIntents([]slot.ID{id}) }

// DeleteIntents removes the submit intents of ids, those that exist, in
// one transaction.
func (db *DB) DeleteIntents(ids []slot.ID) error {
	var wfs []string
	var ts []time.Time
	for _, id := range ids {
		if err := validWorkflow(id.Workflow); err != nil {
			return err
		}
		has := false
		if err := db.read(id.Workflow, func(ix *wfIndex) { _, has = ix.intents[key(id.Time)] }); err != nil {
			return err
		}
		if has {
			wfs, ts = append(wfs, id.Workflow), append(ts, ms(id.Time))
		}
	}
	if len(wfs) == 0 {
		return nil
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	versions, err := db.writeTx(fmt.Sprintf("delete %d submit intents", len(wfs)), wfs, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM celos_intents USING unnest($1::text[], $2::timestamptz[]) AS d(workflow, slot_time)
WHERE celos_intents.workflow = d.workflow AND celos_intents.slot_time = d.slot_time`, wfs, ts)
		return tag.RowsAffected(), err
	})
	if err != nil {
		return err
	}
	byWf := indexesByWorkflow(wfs)
	db.follow(versions, func(wf string, ix *wfIndex) {
		for _, i := range byWf[wf] {
			delete(ix.intents, key(ts[i]))
		}
	})
	return nil
}

// Paused reports whether workflow wf is paused.
func (db *DB) Paused(wf string) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.paused[wf]
}

// SetPaused pauses or unpauses a workflow.
func (db *DB) SetPaused(wf string, paused bool) error {
	if err := validWorkflow(wf); err != nil {
		return err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	q := "INSERT INTO celos_paused (workflow) VALUES ($1) ON CONFLICT DO NOTHING"
	what := "pause " + wf
	if !paused {
		q, what = "DELETE FROM celos_paused WHERE workflow = $1", "unpause "+wf
	}
	versions, err := db.writeTx(what, []string{wf}, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, q, wf)
		return tag.RowsAffected(), err
	})
	if err != nil {
		return err
	}
	db.follow(versions, func(string, *wfIndex) {})
	db.mu.Lock()
	defer db.mu.Unlock()
	if paused {
		db.paused[wf] = true
	} else {
		delete(db.paused, wf)
	}
	return nil
}

// Owners reads every owner record.
func (db *DB) Owners() (map[string]store.Owner, error) {
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, "SELECT workflow, project, file FROM celos_owners")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: read owner records: %w", pgError(err))
	}
	out := make(map[string]store.Owner)
	var wf string
	var o store.Owner
	if _, err := pgx.ForEachRow(rows, []any{&wf, &o.Project, &o.File}, func() error { out[wf] = o; return nil }); err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: read owner records: %w", pgError(err))
	}
	db.reads.Add(int64(len(out)))
	return out, nil
}

// SetOwner records o as the owner of workflow wf.
func (db *DB) SetOwner(wf string, o store.Owner) error {
	if err := checkOwner(wf, o); err != nil {
		return err
	}
	return db.slotWrite("record owner of "+wf, wf, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, `INSERT INTO celos_owners (workflow, project, file) VALUES ($1, $2, $3)
ON CONFLICT (workflow) DO UPDATE SET project = excluded.project, file = excluded.file`, wf, o.Project, o.File)
		return tag.RowsAffected(), err
	}, func(*wfIndex) {})
}

// DeleteOwner removes the owner record of workflow wf (a missing one is
// not an error).
func (db *DB) DeleteOwner(wf string) error {
	if err := validWorkflow(wf); err != nil {
		return err
	}
	return db.slotWrite("remove owner record of "+wf, wf, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, "DELETE FROM celos_owners WHERE workflow = $1", wf)
		return tag.RowsAffected(), err
	}, func(*wfIndex) {})
}

// WriteOwners records the owners in set and removes the records of the
// workflows in remove (a missing one is not an error; one also in set is
// kept), in one transaction: 10,000 new workflows cost one commit, not
// 10,000. It returns the workflows whose record could not be written or
// removed: invalid names, and all of them when the transaction fails —
// unless the fence refused some, when each workflow is written in a
// transaction of its own so that only the fenced ones are refused (as
// PutStates does).
func (db *DB) WriteOwners(set map[string]store.Owner, remove []string) map[string]error {
	failed := make(map[string]error)
	var wfs, projects, files, gone []string
	for wf, o := range set {
		if err := checkOwner(wf, o); err != nil {
			failed[wf] = err
			continue
		}
		wfs, projects, files = append(wfs, wf), append(projects, o.Project), append(files, o.File)
	}
	for _, wf := range remove {
		if _, ok := set[wf]; ok {
			continue
		}
		if err := validWorkflow(wf); err != nil {
			failed[wf] = err
			continue
		}
		gone = append(gone, wf)
	}
	all := append(append([]string(nil), wfs...), gone...)
	if len(all) == 0 {
		return nilIfEmpty(failed)
	}
	what := fmt.Sprintf("record %d workflow owners and remove %d (%s, ...)", len(wfs), len(gone), all[0])
	err := db.ownersWrite(what, all, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		var n int64
		if len(wfs) > 0 {
			tag, err := tx.Exec(ctx, `INSERT INTO celos_owners (workflow, project, file)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (workflow) DO UPDATE SET project = excluded.project, file = excluded.file`, wfs, projects, files)
			if err != nil {
				return 0, err
			}
			n += tag.RowsAffected()
		}
		if len(gone) > 0 {
			tag, err := tx.Exec(ctx, "DELETE FROM celos_owners WHERE workflow = ANY($1)", gone)
			if err != nil {
				return 0, err
			}
			n += tag.RowsAffected()
		}
		return n, nil
	})
	if err == nil {
		return nilIfEmpty(failed)
	}
	if !errors.Is(err, ErrFenced) || len(all) == 1 {
		for _, wf := range all {
			failed[wf] = err
		}
		return failed
	}
	for i, wf := range wfs {
		if err := db.SetOwner(wf, store.Owner{Project: projects[i], File: files[i]}); err != nil {
			failed[wf] = err
		}
	}
	for _, wf := range gone {
		if err := db.DeleteOwner(wf); err != nil {
			failed[wf] = err
		}
	}
	return nilIfEmpty(failed)
}

// ownersWrite runs one write of the owner records of wfs (no index holds
// them: the indexes only follow the versions).
func (db *DB) ownersWrite(what string, wfs []string, fn func(ctx context.Context, tx pgx.Tx) (int64, error)) error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	versions, err := db.writeTx(what, wfs, fn)
	if err != nil {
		return err
	}
	db.follow(versions, func(string, *wfIndex) {})
	return nil
}

// checkOwner refuses an owner record the store cannot keep.
func checkOwner(wf string, o store.Owner) error {
	if err := validWorkflow(wf); err != nil {
		return err
	}
	if !utf8.ValidString(o.Project+o.File) || strings.ContainsRune(o.Project+o.File, 0) {
		return fmt.Errorf("%w: owner of %s: project or file name is not valid UTF-8 text", store.ErrBadName, wf)
	}
	return nil
}

func nilIfEmpty(m map[string]error) map[string]error {
	if len(m) == 0 {
		return nil
	}
	return m
}

// indexesByWorkflow maps each workflow of wfs to its indexes in wfs.
func indexesByWorkflow(wfs []string) map[string][]int {
	out := make(map[string][]int)
	for i, wf := range wfs {
		out[wf] = append(out[wf], i)
	}
	return out
}
