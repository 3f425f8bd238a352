package trigger

// What event triggers read: registers, looked up key by key when the
// store can, and the per-step memory of the answers.

import (
	"sync"
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
// Lookups cost about 10 µs on the file store and a round trip on
// PostgreSQL (docs/benchmarks.md, "Event triggers over a large bucket"):
// a steady step asks for the keys of the slots that wait, far fewer.
const maxRegisterLookups = 256

// bucketMemo is what a step knows of one bucket: the keys looked up, and
// the listing once it was read.
type bucketMemo struct {
	looked map[string]bool
	listed bool
	keys   map[string]bool
	err    error // of the listing
}

// registersMemo reads each key, or each bucket, once per step.
type registersMemo struct {
	regs Registers
	mu   sync.Mutex
	b    map[string]*bucketMemo
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
	if can && len(b.looked) < maxRegisterLookups {
		m.mu.Unlock()
		ok, err := lookup.HasRegister(bucket, key)
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
	} else {
		m.mu.Unlock()
	}
	keys, err := m.regs.RegisterKeys(bucket, "")
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
