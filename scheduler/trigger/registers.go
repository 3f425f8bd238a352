package trigger

// What event triggers read: registers, looked up key by key when the
// store can, and the per-step memory of the answers.

import (
	"sync"
	"time"
)

// Registers tells event triggers which keys a register bucket holds (the
// engine's registers; statedb.DB). A bucket that does not exist holds none.
type Registers interface {
	RegisterKeys(bucket, prefix string) ([]string, error)
}

// RegisterLookup is what Registers may offer besides listing: whether
// bucket holds key, answered without listing the bucket (statedb.DB: one
// stat; statepg.DB: one indexed query), exactly as the listing would
// answer (a key that is not a valid register name is in no bucket). An
// event trigger then costs the same in a bucket of ten keys as in one of
// years of hourly keys.
type RegisterLookup interface {
	HasRegister(bucket, key string) (bool, error)
}

// maxRegisterLookups is how many distinct keys of one bucket a step looks
// up one by one; a step that asks for more lists the bucket once and
// answers the rest from the listing (as every step did before lookups).
// A steady step asks for the keys of the slots that wait, far fewer.
const maxRegisterLookups = 256

// RegisterCosts is what the steps of one engine learn of reading each
// register bucket (the zero value is ready; safe for concurrent use): how
// long a listing of it takes, and how long the lookups of a step take in
// all (each a moving average, so that one slow read on a busy machine
// turns the choice for some steps only). A step lists a bucket rather
// than look keys up when the listing costs less than the lookups (a small
// bucket on PostgreSQL, where a lookup is a round trip), the first time
// it meets a bucket (its listing unknown), and now and then while it
// looks keys up, to learn the listing's cost again (the bucket may have
// shrunk): after max(8, 4 × listing ÷ lookups) steps, which keeps what
// those listings add under a quarter of the lookups' cost. Only the cost
// depends on it, never an answer.
type RegisterCosts struct {
	mu   sync.Mutex
	b    map[string]*bucketCost
	step uint64
	now  func() time.Time // time.Now; tests set it
}

type bucketCost struct {
	list      time.Duration // a listing, averaged (0: none yet)
	lookups   time.Duration // a step's lookups, averaged (0: none yet)
	cur       time.Duration // the lookups of step
	step      uint64        // the step cur counts
	sinceList int           // steps that read the bucket since its last listing
}

// average moves the average avg towards d (the first sample is d).
func average(avg, d time.Duration) time.Duration {
	d = max(d, 1)
	if avg == 0 {
		return d
	}
	return avg + (d-avg)/4
}

func (c *RegisterCosts) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// newStep numbers a step (NewStepEnv).
func (c *RegisterCosts) newStep() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step++
	return c.step
}

// preferList tells whether step should list bucket at its first ask.
func (c *RegisterCosts) preferList(bucket string, step uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	bc := c.bucket(bucket, step)
	switch {
	case bc.list == 0:
		return true
	case bc.lookups == 0:
		return false
	case bc.list < bc.lookups:
		return true
	}
	return bc.sinceList >= max(8, int(min(4*bc.list/bc.lookups, 1<<20)))
}

// bucket returns bucket's costs, the lookups of an earlier step taken
// into the average when step is a new one; c.mu is held.
func (c *RegisterCosts) bucket(bucket string, step uint64) *bucketCost {
	if c.b == nil {
		c.b = make(map[string]*bucketCost)
	}
	bc := c.b[bucket]
	if bc == nil {
		bc = &bucketCost{}
		c.b[bucket] = bc
	}
	if bc.step != step {
		if bc.cur > 0 {
			bc.lookups = average(bc.lookups, bc.cur)
		}
		bc.cur, bc.step = 0, step
		bc.sinceList++
	}
	return bc
}

func (c *RegisterCosts) looked(bucket string, step uint64, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bucket(bucket, step).cur += max(d, 1)
}

func (c *RegisterCosts) listed(bucket string, step uint64, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bc := c.bucket(bucket, step)
	bc.list = average(bc.list, d)
	bc.sinceList = 0
}

// WithRegisterCosts has the step's Env (NewStepEnv) choose between
// looking keys up and listing a bucket by what costs has learnt, and
// teach it what this step reads. Without it a step looks keys up.
func (env Env) WithRegisterCosts(costs *RegisterCosts) Env {
	if m, ok := env.Registers.(*registersMemo); ok && costs != nil {
		m.costs, m.step = costs, costs.newStep()
	}
	return env
}

// bucketMemo is what a step knows of one bucket: the keys looked up, and
// the listing once it was read.
type bucketMemo struct {
	decided bool // whether to list at once was decided (costs)
	listing bool // list at once, look nothing up
	looked  map[string]bool
	listed  bool
	keys    map[string]bool
	err     error // of the listing
}

// registersMemo reads each key, or each bucket, once per step.
type registersMemo struct {
	regs  Registers
	costs *RegisterCosts // nil: look up
	step  uint64
	mu    sync.Mutex
	b     map[string]*bucketMemo
}

func (m *registersMemo) RegisterKeys(bucket, prefix string) ([]string, error) {
	return m.regs.RegisterKeys(bucket, prefix)
}

// bucket returns the memo of bucket; m.mu is held.
func (m *registersMemo) bucket(name string) *bucketMemo {
	if m.b == nil { // made on first use: a step without event triggers allocates nothing here
		m.b = make(map[string]*bucketMemo)
	}
	b := m.b[name]
	if b == nil {
		b = &bucketMemo{}
		m.b[name] = b
	}
	return b
}

func (m *registersMemo) has(bucket, key string) (bool, error) {
	m.mu.Lock()
	b := m.bucket(bucket)
	// A key looked up keeps its answer for the step, also after a listing.
	if ok, seen := b.looked[key]; seen {
		m.mu.Unlock()
		return ok, nil
	}
	if b.listed {
		m.mu.Unlock()
		return b.keys[key], b.err
	}
	lookup, can := m.regs.(RegisterLookup)
	if can && !b.decided {
		b.decided = true
		b.listing = m.costs != nil && m.costs.preferList(bucket, m.step)
	}
	can = can && !b.listing && len(b.looked) < maxRegisterLookups
	m.mu.Unlock()
	if can {
		ok, err := m.lookup(lookup, bucket, key)
		if err == nil {
			m.mu.Lock()
			if b.looked == nil {
				b.looked = make(map[string]bool)
			}
			b.looked[key] = ok
			m.mu.Unlock()
			return ok, nil
		}
		// A lookup that fails: the listing decides, as before lookups
		// (its error, or its answer).
	}
	return m.list(b, bucket, key)
}

func (m *registersMemo) lookup(l RegisterLookup, bucket, key string) (bool, error) {
	if m.costs == nil {
		return l.HasRegister(bucket, key)
	}
	t0 := m.costs.clock()
	ok, err := l.HasRegister(bucket, key)
	m.costs.looked(bucket, m.step, m.costs.clock().Sub(t0))
	return ok, err
}

// list lists bucket (once per step) and answers key from the listing.
func (m *registersMemo) list(b *bucketMemo, bucket, key string) (bool, error) {
	var t0 time.Time
	if m.costs != nil {
		t0 = m.costs.clock()
	}
	keys, err := m.regs.RegisterKeys(bucket, "")
	if m.costs != nil && err == nil {
		m.costs.listed(bucket, m.step, m.costs.clock().Sub(t0))
	}
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	m.mu.Lock()
	if !b.listed {
		b.listed, b.keys, b.err = true, set, err
	}
	ok, err := b.keys[key], b.err
	m.mu.Unlock()
	return ok, err
}

// hasRegister reports whether bucket holds key.
func hasRegister(regs Registers, bucket, key string) (bool, error) {
	if m, ok := regs.(*registersMemo); ok {
		return m.has(bucket, key)
	}
	if l, ok := regs.(RegisterLookup); ok {
		if found, err := l.HasRegister(bucket, key); err == nil {
			return found, nil
		}
	}
	keys, err := regs.RegisterKeys(bucket, key)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		if k == key {
			return true, nil
		}
	}
	return false, nil
}
