package statepg

// Pool admission of submit intents across instances (docs/ha.md, "Pools").

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// poolLockClass is the first key of the transaction-scoped advisory locks
// that serialise the admission of a pool's submit intents ("cpoo" in
// ASCII); the second is a hash of the pool's name. Two-key advisory locks
// do not meet the one-key migration lock.
const poolLockClass = 0x63706f6f

// poolLockKey is the second key of pool name's lock (two names with the
// same hash only wait for each other).
func poolLockKey(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}

// poolAdmission is one pool's part of a PutIntents call.
type poolAdmission struct {
	name      string
	key       int32
	limit     int
	workflows []string
	// departed are slots of workflows no longer the pool's that count in
	// it while RUNNING (store.PoolClaim.Slots), by workflow.
	departed map[string][]int64
	idx      []int // the intents of the pool, in rank order
}

// admitPools decides, inside tx, which submit intents of pool workflows
// may be recorded: for each pool among claims (claims[i] is the claim of
// the intent of slot wfs[i] at ts[i], nil for none), in the order of the
// pools' lock keys, it takes the pool's transaction-scoped advisory lock,
// then counts the pool's occupied slots — RUNNING, or with an open
// submit intent, in any of its workflows, whichever instance wrote them,
// and the RUNNING ones of workflows that left it (PoolClaim.Slots) —
// as committed when the lock was granted (READ COMMITTED: each statement
// sees what committed before it began). An intent of a slot already
// occupied (an intent written again, a recovery) is always admitted;
// another is while the pool has room, in rank order. It returns the
// refused intents by index, each with an error wrapping
// store.ErrPoolFull. The lock is held until tx ends, so a second instance
// admitting for the same pool counts this transaction's intents.
func admitPools(ctx context.Context, tx pgx.Tx, wfs []string, ts []time.Time, claims []*store.PoolClaim) (map[int]error, error) {
	pools := make(map[string]*poolAdmission)
	for i, c := range claims {
		if c == nil {
			continue
		}
		p := pools[c.Name]
		if p == nil {
			p = &poolAdmission{name: c.Name, key: poolLockKey(c.Name), limit: c.Limit, workflows: c.Workflows}
			if !sort.StringsAreSorted(p.workflows) {
				p.workflows = sortedUnique(p.workflows)
			}
			for _, id := range c.Slots {
				if p.departed == nil {
					p.departed = make(map[string][]int64)
				}
				p.departed[id.Workflow] = append(p.departed[id.Workflow], key(id.Time))
			}
			pools[c.Name] = p
		}
		p.idx = append(p.idx, i)
	}
	if len(pools) == 0 {
		return nil, nil
	}
	order := make([]*poolAdmission, 0, len(pools))
	var all []string // (duplicates do no harm to = ANY)
	for _, p := range pools {
		order = append(order, p)
		sort.SliceStable(p.idx, func(a, b int) bool { return claims[p.idx[a]].Rank < claims[p.idx[b]].Rank })
		if len(pools) == 1 && len(all) == 0 {
			all = p.workflows[:len(p.workflows):len(p.workflows)] // appended to below: a copy then
		} else {
			all = append(all, p.workflows...)
		}
		for _, i := range p.idx {
			if !inSorted(p.workflows, wfs[i]) {
				all = append(all, wfs[i]) // (in its claim's workflows, unless the caller erred)
			}
		}
		for wf := range p.departed {
			all = append(all, wf)
		}
	}
	// Always the same order: two instances locking the same pools cannot
	// deadlock.
	sort.Slice(order, func(a, b int) bool {
		if order[a].key != order[b].key {
			return order[a].key < order[b].key
		}
		return order[a].name < order[b].name
	})
	occupied, err := lockAndCount(ctx, tx, order, all)
	if err != nil {
		return nil, err
	}
	refused := make(map[int]error)
	for _, p := range order {
		used := 0
		for w, slots := range occupied {
			if p.member(w, wfs) {
				used += len(slots)
				continue
			}
			for _, k := range p.departed[w] {
				if slots[k] {
					used++
				}
			}
		}
		for _, i := range p.idx {
			k := key(ts[i])
			switch {
			case occupied[wfs[i]][k]:
				// Already counted: an intent written again.
			case used < p.limit:
				used++
				if occupied[wfs[i]] == nil {
					occupied[wfs[i]] = make(map[int64]bool)
				}
				occupied[wfs[i]][k] = true
			default:
				refused[i] = fmt.Errorf("pool %q is %w: %d of %d running or being submitted across the instances sharing the database", p.name, store.ErrPoolFull, used, p.limit)
			}
		}
	}
	return refused, nil
}

// lockAndCount takes the locks of the pools of order, in that order, then
// reads the slots of workflows all that are RUNNING or have an open
// intent, in one round trip: per workflow, their slot times (ms).
func lockAndCount(ctx context.Context, tx pgx.Tx, order []*poolAdmission, all []string) (map[string]map[int64]bool, error) {
	b := &pgx.Batch{}
	for _, p := range order {
		b.Queue("SELECT pg_advisory_xact_lock($1::int4, $2::int4)", int32(poolLockClass), p.key)
	}
	b.Queue(occupiedQuery, all)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for _, p := range order {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("lock pool %q: %w", p.name, err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("count the slots of %d pools: %w", len(order), err)
	}
	occupied := make(map[string]map[int64]bool)
	var wf string
	var t time.Time
	if _, err := pgx.ForEachRow(rows, []any{&wf, &t}, func() error {
		if occupied[wf] == nil {
			occupied[wf] = make(map[int64]bool)
		}
		occupied[wf][key(t)] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("count the slots of %d pools: %w", len(order), err)
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	return occupied, nil
}

// member reports whether workflow wf is one of the pool's: of its
// claim's workflows (sorted), or one of its intents'.
func (p *poolAdmission) member(wf string, wfs []string) bool {
	if inSorted(p.workflows, wf) {
		return true
	}
	for _, i := range p.idx {
		if wfs[i] == wf {
			return true
		}
	}
	return false
}

// inSorted reports whether sorted holds s.
func inSorted(sorted []string, s string) bool {
	i := sort.SearchStrings(sorted, s)
	return i < len(sorted) && sorted[i] == s
}

// occupiedQuery reads the slots of the workflows $1 that are RUNNING or
// have an open submit intent: what a pool's admission counts.
const occupiedQuery = `SELECT workflow, slot_time FROM celos_slots WHERE workflow = ANY($1) AND status = 'RUNNING'
UNION
SELECT workflow, slot_time FROM celos_intents WHERE workflow = ANY($1)`

// PoolOccupied returns the slots of workflows wfs that are RUNNING or have
// an open submit intent in the database now, whichever instance wrote
// them: what PutIntents' pool admission counts, read without its lock, in
// one round trip. The engine asks it when its own view — which follows
// another instance's writes only at the next Refresh — would hold a slot
// of a pool (docs/ha.md, "Pools"): a place another instance freed is
// then taken at once, not a Refresh later. PutIntents' count under the
// pool's lock stays the authority.
func (db *DB) PoolOccupied(wfs []string) ([]slot.ID, error) {
	if len(wfs) == 0 {
		return nil, nil
	}
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, occupiedQuery, wfs)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: count the occupied slots of %d pool workflows: %w", len(wfs), pgError(err))
	}
	var out []slot.ID
	var id slot.ID
	if _, err := pgx.ForEachRow(rows, []any{&id.Workflow, &id.Time}, func() error {
		id.Time = id.Time.UTC()
		out = append(out, id)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: count the occupied slots of %d pool workflows: %w", len(wfs), pgError(err))
	}
	db.reads.Add(int64(len(out)))
	return out, nil
}
