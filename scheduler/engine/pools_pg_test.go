package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// poolService is the one external service every instance submits to (one
// Oozie, one shared resource behind the pool). At every submission it
// checks that the pool's limit holds both at the service (jobs not
// finished) and in the database (slots RUNNING or with an open submit
// intent, counted by occupied).
type poolService struct {
	limit    int
	occupied func() (int, error)

	mu         sync.Mutex
	n          int
	live       map[string]slot.ID // submitted, not finished
	done       map[string]bool
	submits    []slot.ID
	maxLive    int
	violations []string
}

func (p *poolService) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	ext := fmt.Sprintf("job-%d", p.n)
	p.live[ext] = id
	p.submits = append(p.submits, id)
	p.maxLive = max(p.maxLive, len(p.live))
	if len(p.live) > p.limit {
		p.violations = append(p.violations, fmt.Sprintf("submission of %s: %d jobs of the pool running at once, limit %d", id, len(p.live), p.limit))
	}
	n, err := p.occupied()
	if err != nil {
		p.violations = append(p.violations, fmt.Sprintf("submission of %s: count the pool's slots: %v", id, err))
	} else if n > p.limit {
		p.violations = append(p.violations, fmt.Sprintf("submission of %s: %d slots of the pool RUNNING or being submitted in the database, limit %d", id, n, p.limit))
	}
	return ext, nil
}

func (p *poolService) Status(ctx context.Context, w *workflow.Workflow, ext string) (external.Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done[ext]:
		return external.Status{Success: true, Detail: "SUCCEEDED"}, nil
	case p.live[ext] != (slot.ID{}):
		return external.Status{Running: true, Detail: "RUNNING"}, nil
	}
	return external.Status{}, fmt.Errorf("no job %s", ext)
}

func (p *poolService) Kill(ctx context.Context, w *workflow.Workflow, ext string) error {
	return fmt.Errorf("kill %s: not expected in this test", ext)
}

// finishSome ends a random non-empty subset of the running jobs.
func (p *poolService) finishSome(rng *rand.Rand) {
	p.mu.Lock()
	defer p.mu.Unlock()
	exts := make([]string, 0, len(p.live))
	for ext := range p.live {
		exts = append(exts, ext)
	}
	sort.Strings(exts)
	rng.Shuffle(len(exts), func(i, j int) { exts[i], exts[j] = exts[j], exts[i] })
	for i, ext := range exts {
		if i > 0 && rng.IntN(2) == 0 {
			continue
		}
		delete(p.live, ext)
		p.done[ext] = true
	}
}

func (p *poolService) liveJobs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// gate holds the first submit-intent write of every instance until all of
// them have reached it (or a generous deadline passed): each instance has
// then decided what to admit before any of them has recorded anything,
// the moment at which instances on one database admit against the same
// view. Armed for one round.
type gate struct {
	n       int
	armed   atomic.Bool
	arrived atomic.Int32
	open    chan struct{}
	once    sync.Once
}

func newGate(n int) *gate { return &gate{n: n, open: make(chan struct{})} }

func (g *gate) wait() {
	if !g.armed.Load() {
		return
	}
	if int(g.arrived.Add(1)) >= g.n {
		g.once.Do(func() { close(g.open) })
	}
	select {
	case <-g.open:
	case <-time.After(30 * time.Second):
	}
}

// gatedDB is an instance's PostgreSQL store whose submit-intent writes
// pass the gate first; every other method (and optional interface) is
// the store's own.
type gatedDB struct {
	*statepg.DB
	g *gate
}

func (d gatedDB) PutIntents(ins map[slot.ID]store.Intent) map[slot.ID]error {
	d.g.wait()
	return d.DB.PutIntents(ins)
}

// TestPoolLimitAcrossInstances: three instances on one PostgreSQL
// database, each owning two workflows of pool "etl" (limit 2), every slot
// READY at once. In the first round of submissions every instance has
// decided before any records an intent (the gate): each sees the pool
// empty. Then many rounds step the instances concurrently while random
// jobs finish. At every submission, and after every round, no more than
// two jobs of the pool run and no more than two of its slots are RUNNING
// or being submitted in the database; the first round fills the pool
// (admission admitted something); every slot runs exactly once; the held
// slots stay READY with a "pool" problem, not a failure.
func TestPoolLimitAcrossInstances(t *testing.T) {
	const limit, instances, perInstance = 2, 3, 2
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	ctx := context.Background()
	wdir := t.TempDir()
	start := ts("2026-11-24T08:00:00.000Z")
	owner := make(map[string]int)
	var ws []workflow.Workflow
	var ids []string
	for i := range instances * perInstance {
		w := fixture.Hourly(fmt.Sprintf("etl-%d", i))
		w.StartTime, w.Pool, w.Priority = start, "etl", i%3
		ws = append(ws, w)
		ids = append(ids, w.ID)
		owner[w.ID] = i % instances
	}
	fixture.WriteProject(t, wdir, "p", ws...)
	poolsFile := filepath.Join(t.TempDir(), "pools.json")
	if err := os.WriteFile(poolsFile, []byte(fmt.Sprintf(`{"pools": {"etl": {"limit": %d}}}`, limit)), 0o644); err != nil {
		t.Fatal(err)
	}

	counter, err := statepg.Open(ctx, dsn, statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { counter.Close() })
	occupied := func() (int, error) {
		var n int
		err := counter.Pool().QueryRow(ctx, `SELECT count(*) FROM (
SELECT workflow, slot_time FROM celos_slots WHERE workflow = ANY($1) AND status = 'RUNNING'
UNION SELECT workflow, slot_time FROM celos_intents WHERE workflow = ANY($1)) s`, ids).Scan(&n)
		return n, err
	}
	svc := &poolService{limit: limit, occupied: occupied, live: make(map[string]slot.ID), done: make(map[string]bool)}
	g := newGate(instances)
	type inst struct {
		db *statepg.DB
		e  *Engine
	}
	var ins []inst
	for i := range instances {
		db, err := statepg.Open(ctx, dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e, err := New(Options{WorkflowsDir: wdir, Store: gatedDB{db, g}, Logger: discard, PoolsFile: poolsFile,
			Owns:     func(wf string) bool { return owner[wf] == i },
			Services: map[string]external.Service{workflow.ServiceCommand: svc}})
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, inst{db, e})
	}
	// round refreshes every instance's store (a clustered server does
	// every lease/3), then steps them all at once.
	round := func(now time.Time) {
		t.Helper()
		for _, in := range ins {
			if _, err := in.db.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, len(ins))
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for i, in := range ins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-begin
				errs[i] = in.e.Step(ctx, now, nil)
			}()
		}
		close(begin)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("instance %d: step at %s: %v", i, slot.FormatTime(now), err)
			}
		}
		if n, err := occupied(); err != nil {
			t.Fatal(err)
		} else if n > limit {
			t.Errorf("after the round at %s: %d slots of the pool RUNNING or being submitted, limit %d", slot.FormatTime(now), n, limit)
		}
	}
	states := func() map[slot.Status]int {
		if _, err := counter.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		out := make(map[slot.Status]int)
		for _, wf := range ids {
			c, err := counter.Count(wf)
			if err != nil {
				t.Fatal(err)
			}
			for st, n := range c {
				out[st] += n
			}
		}
		return out
	}

	now := ts("2026-11-24T09:30:00.000Z") // two slots each: 08:00 and 09:00
	round(now)                            // WAITING → READY
	if got := states()[slot.Ready]; got != 2*len(ids) {
		t.Fatalf("%d READY slots after the first round, want %d", got, 2*len(ids))
	}
	g.armed.Store(true)
	round(now.Add(time.Minute)) // the submissions, every instance gated
	g.armed.Store(false)
	if n := g.arrived.Load(); int(n) != instances {
		t.Fatalf("%d of %d instances wrote submit intents in the gated round (each should have admitted some slots)", n, instances)
	}
	if n := svc.liveJobs(); n != limit {
		t.Errorf("after the first round of submissions %d jobs run, want the pool full: %d", n, limit)
	}
	if st := states(); st[slot.Running] != limit || st[slot.Ready] != 2*len(ids)-limit {
		t.Errorf("after the first round of submissions: %v, want %d RUNNING and %d READY", st, limit, 2*len(ids)-limit)
	}
	// Six chosen (each workflow's 08:00), two submitted, four held: by the
	// instances' own admission or by the store's.
	var use PoolUse
	for _, in := range ins {
		u := in.e.LastStep().Pools["etl"]
		use.Running, use.Waiting = use.Running+u.Running, use.Waiting+u.Waiting
	}
	if use.Running != limit || use.Waiting != len(ids)-limit {
		t.Errorf("the instances' step reports say %d submitted and %d waiting, want %d and %d", use.Running, use.Waiting, limit, len(ids)-limit)
	}
	for i, in := range ins {
		if errs := in.e.LastStep().Errors; errs["submit"] != 0 {
			t.Errorf("instance %d counted %d submit errors: a slot the pool holds is not a failure", i, errs["submit"])
		}
		for _, wf := range ids {
			if owner[wf] != i {
				continue
			}
			for _, st := range mustActive(t, in.db, wf) {
				if st.Status != slot.Ready {
					continue
				}
				if st.RetryCount != 0 {
					t.Errorf("held slot %s has retry count %d", st.ID, st.RetryCount)
				}
				if slot.FormatTime(st.ID.Time) != slot.FormatTime(start) {
					continue // its workflow's serial strategy did not choose it
				}
				p := problemsOf(in.e, wf, opPool)
				if len(p) == 0 || !strings.Contains(p[0].Error, `pool "etl" is full: 2 of 2 running`) {
					t.Errorf("held slot %s: problems %+v, want one of op %q saying the pool is full", st.ID, in.e.Problems(wf), opPool)
				}
			}
		}
	}

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	const maxRounds = 100
	r := 0
	for ; r < maxRounds && states()[slot.Success] < 2*len(ids); r++ {
		svc.finishSome(rng)
		round(now.Add(time.Duration(2+r) * time.Minute))
	}
	if r == maxRounds {
		t.Errorf("after %d rounds: %v, want every slot SUCCESS (the pool starves)", maxRounds, states())
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for _, v := range svc.violations {
		t.Error(v)
	}
	if svc.maxLive != limit {
		t.Errorf("at most %d jobs ran at once, want the limit %d reached", svc.maxLive, limit)
	}
	seen := make(map[slot.ID]int)
	for _, id := range svc.submits {
		seen[id]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("slot %s submitted %d times", id, n)
		}
	}
	if len(seen) != 2*len(ids) {
		t.Errorf("%d slots submitted, want %d", len(seen), 2*len(ids))
	}
	t.Logf("%d rounds after the first submissions", r)
}

func mustActive(t *testing.T, db Store, wf string) []slot.State {
	t.Helper()
	out, err := db.Active(wf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
