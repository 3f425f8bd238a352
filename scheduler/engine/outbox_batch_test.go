package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// Both stores write a step's outbox records in one batch.
var (
	_ registerBatcher = (*statedb.DB)(nil)
	_ registerBatcher = (*statepg.DB)(nil)
)

// regCalls counts the outbox's register writes a store saw, and fails
// what the test asks.
type regCalls struct {
	mu         sync.Mutex
	n          writes
	failBatch  error // PutRegisters fails every key with it
	failStates error // PutStates fails every state with it
}

// writes: Puts and Deletes, one-record writes of the outbox; Batches
// and BatchKeys, PutRegisters calls and their keys; DelBatches and
// DelKeys, DeleteRegisters.
type writes struct {
	Puts, Deletes, Batches, BatchKeys, DelBatches, DelKeys int
}

func (c *regCalls) count(f func(n *writes)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.n)
}

func (c *regCalls) get() writes {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// batchingStore is a store with registers written in batches (both
// stores).
type batchingStore interface {
	Store
	Registers
	registerBatcher
}

// countingStore counts (and fails) the outbox's writes of a batching
// store; it hides the store's other optional interfaces.
type countingStore struct {
	batchingStore
	c *regCalls
}

func (s countingStore) PutRegister(bucket, key string, v json.RawMessage) error {
	if bucket == outboxBucket {
		s.c.count(func(n *writes) { n.Puts++ })
	}
	return s.batchingStore.PutRegister(bucket, key, v)
}

func (s countingStore) DeleteRegister(bucket, key string) error {
	if bucket == outboxBucket {
		s.c.count(func(n *writes) { n.Deletes++ })
	}
	return s.batchingStore.DeleteRegister(bucket, key)
}

func (s countingStore) PutRegisters(bucket string, kv map[string]json.RawMessage) map[string]error {
	if bucket != outboxBucket { // (the definitions recorded before a submission)
		return s.batchingStore.PutRegisters(bucket, kv)
	}
	s.c.count(func(n *writes) { n.Batches++; n.BatchKeys += len(kv) })
	if err := s.c.failBatch; err != nil {
		failed := make(map[string]error, len(kv))
		for k := range kv {
			failed[k] = err
		}
		return failed
	}
	return s.batchingStore.PutRegisters(bucket, kv)
}

func (s countingStore) DeleteRegisters(bucket string, keys []string) map[string]error {
	if bucket != outboxBucket {
		return s.batchingStore.DeleteRegisters(bucket, keys)
	}
	s.c.count(func(n *writes) { n.DelBatches++; n.DelKeys += len(keys) })
	return s.batchingStore.DeleteRegisters(bucket, keys)
}

func (s countingStore) PutStates(sts []slot.State) map[slot.ID]error {
	if err := s.c.failStates; err != nil {
		failed := make(map[slot.ID]error, len(sts))
		for _, st := range sts {
			failed[st.ID] = err
		}
		return failed
	}
	return s.batchingStore.PutStates(sts)
}

// oneByOneStore is a store without batched register writes, counting
// the outbox's.
type oneByOneStore struct {
	Store
	regs Registers
	c    *regCalls
}

func (s oneByOneStore) GetRegister(bucket, key string) (json.RawMessage, error) {
	return s.regs.GetRegister(bucket, key)
}
func (s oneByOneStore) PutRegister(bucket, key string, v json.RawMessage) error {
	if bucket == outboxBucket {
		s.c.count(func(n *writes) { n.Puts++ })
	}
	return s.regs.PutRegister(bucket, key, v)
}
func (s oneByOneStore) DeleteRegister(bucket, key string) error {
	if bucket == outboxBucket {
		s.c.count(func(n *writes) { n.Deletes++ })
	}
	return s.regs.DeleteRegister(bucket, key)
}
func (s oneByOneStore) DeleteRegistersWithPrefix(bucket, prefix string) error {
	return s.regs.DeleteRegistersWithPrefix(bucket, prefix)
}
func (s oneByOneStore) RegisterKeys(bucket, prefix string) ([]string, error) {
	return s.regs.RegisterKeys(bucket, prefix)
}
func (s oneByOneStore) PutStates(sts []slot.State) map[slot.ID]error {
	if err := s.c.failStates; err != nil {
		failed := make(map[slot.ID]error, len(sts))
		for _, st := range sts {
			failed[st.ID] = err
		}
		return failed
	}
	return s.Store.PutStates(sts)
}

// threeFeeds writes a project of three hourly workflows from 08:00, each
// with two webhook targets for its failures: a step in which their 08:00
// slots fail has six deliveries.
func threeFeeds(t *testing.T) string {
	t.Helper()
	wdir := t.TempDir()
	var ws []workflow.Workflow
	for i := range 3 {
		w := fixture.Hourly(fmt.Sprintf("feed-%d", i))
		w.StartTime = ts("2026-11-24T08:00Z")
		w.Notify = []workflow.Notification{
			{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/a", Events: []string{workflow.EventFailure}},
			{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/b", Events: []string{workflow.EventFailure}},
		}
		ws = append(ws, w)
	}
	fixture.WriteProject(t, wdir, "p", ws...)
	return wdir
}

// batchStores are the two stores, each behind countingStore, and the
// file store without batches, each with its counter.
func batchStores(t *testing.T) map[string]func(t *testing.T) (Store, Registers, *regCalls) {
	return map[string]func(t *testing.T) (Store, Registers, *regCalls){
		"file": func(t *testing.T) (Store, Registers, *regCalls) {
			db := openDB(t, t.TempDir())
			c := &regCalls{}
			return countingStore{db, c}, db, c
		},
		"pg": func(t *testing.T) (Store, Registers, *regCalls) {
			db, err := statepg.Open(context.Background(), pgtest.Shared(t).CreateDB(t), statepg.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			c := &regCalls{}
			return countingStore{db, c}, db, c
		},
		"file, one by one": func(t *testing.T) (Store, Registers, *regCalls) {
			db := openDB(t, t.TempDir())
			c := &regCalls{}
			return oneByOneStore{Store: db, regs: db, c: c}, db, c
		},
	}
}

// stepToFailure steps the three feeds' 08:00 slots to READY, RUNNING and,
// at 08:20, FAILURE, and returns what the last step handed out.
func stepToFailure(t *testing.T, oe *outboxEngine, svc *fakeService) []string {
	t.Helper()
	oe.step(t, "2026-11-24T08:10Z")
	oe.step(t, "2026-11-24T08:11Z")
	oe.taken()
	svc.finishAll(false)
	oe.step(t, "2026-11-24T08:20Z")
	return oe.taken()
}

// TestOutboxRecordsOfAStepInOneBatch: the six deliveries of a step in
// which three slots fail are recorded with one batched write on either
// store (no write of its own each), one by one on a store without
// batches; either way the outbox then holds the six records, each under
// its delivery's id, and the failures are recorded.
func TestOutboxRecordsOfAStepInOneBatch(t *testing.T) {
	for name, open := range batchStores(t) {
		t.Run(name, func(t *testing.T) {
			db, regs, c := open(t)
			svc := newFake()
			oe := startOutboxEngine(t, threeFeeds(t), "2026-11-24T08:00Z", svc, db, nil, OutboxOptions{})
			sent := stepToFailure(t, oe, svc)
			if len(sent) != 6 {
				t.Fatalf("handed out %q, want six failures", sent)
			}
			want := writes{Batches: 1, BatchKeys: 6}
			if name == "file, one by one" {
				want = writes{Puts: 6}
			}
			if d := cmp.Diff(want, c.get()); d != "" {
				t.Errorf("outbox writes of the step (-want +got):\n%s", d)
			}
			keys := outboxKeys(t, regs)
			var ids []string
			for _, k := range keys {
				_, _, id, ok := parseOutboxKey(k)
				if !ok {
					t.Fatalf("outbox key %q", k)
				}
				ids = append(ids, "failure "+id)
				raw, err := regs.GetRegister(outboxBucket, k)
				if err != nil {
					t.Fatal(err)
				}
				var rec outboxRecord
				if err := json.Unmarshal(raw, &rec); err != nil || rec.Delivery != id || rec.Status != slot.Failure || rec.Recorded {
					t.Errorf("record %s: %+v, %v", k, rec, err)
				}
			}
			if d := cmp.Diff(sortedCopy(sent), sortedCopy(ids)); d != "" {
				t.Errorf("deliveries handed out and recorded (-out +recorded):\n%s", d)
			}
			for i := range 3 {
				st, found, err := db.Get(slot.ID{Workflow: fmt.Sprintf("feed-%d", i), Time: ts("2026-11-24T08:00Z")})
				if err != nil || !found || st.Status != slot.Failure {
					t.Errorf("feed-%d 08:00: %+v found=%v %v", i, st, found, err)
				}
			}
		})
	}
}

// TestOutboxBatchFailureSendsFromMemory: when the batch of a step's
// records fails, every delivery is handed out as before the outbox —
// without a delivery id, logged once each — and the states are written.
func TestOutboxBatchFailureSendsFromMemory(t *testing.T) {
	for _, name := range []string{"file", "pg"} {
		t.Run(name, func(t *testing.T) {
			db, regs, c := batchStores(t)[name](t)
			c.failBatch = errors.New("injected: the batch failed")
			svc := newFake()
			oe := startOutboxEngine(t, threeFeeds(t), "2026-11-24T08:00Z", svc, db, nil, OutboxOptions{})
			var logs bytes.Buffer
			var mu sync.Mutex
			oe.e.log = slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
			sent := stepToFailure(t, oe, svc)
			if d := cmp.Diff([]string{"failure ", "failure ", "failure ", "failure ", "failure ", "failure "}, sent); d != "" {
				t.Errorf("handed out (-want +got):\n%s", d)
			}
			mu.Lock()
			out := logs.String()
			mu.Unlock()
			if n := strings.Count(out, "notification not recorded in the outbox"); n != 6 || !strings.Contains(out, "injected: the batch failed") {
				t.Errorf("%d warnings, want 6 naming the error:\n%s", n, out)
			}
			if keys := outboxKeys(t, regs); len(keys) != 0 {
				t.Errorf("outbox: %q", keys)
			}
			for i := range 3 {
				st, found, err := db.Get(slot.ID{Workflow: fmt.Sprintf("feed-%d", i), Time: ts("2026-11-24T08:00Z")})
				if err != nil || !found || st.Status != slot.Failure {
					t.Errorf("feed-%d 08:00: %+v found=%v %v", i, st, found, err)
				}
			}
		})
	}
}

// TestOutboxDiscardedInOneBatch: when the step's state write fails, the
// records of its six deliveries are removed with one batched removal (one
// by one on a store without batches), and nothing is handed out.
func TestOutboxDiscardedInOneBatch(t *testing.T) {
	for name, open := range batchStores(t) {
		t.Run(name, func(t *testing.T) {
			db, regs, c := open(t)
			svc := newFake()
			oe := startOutboxEngine(t, threeFeeds(t), "2026-11-24T08:00Z", svc, db, nil, OutboxOptions{})
			oe.step(t, "2026-11-24T08:10Z")
			oe.step(t, "2026-11-24T08:11Z")
			svc.finishAll(false)
			c.mu.Lock()
			c.failStates = errors.New("injected: states not written")
			c.mu.Unlock()
			before := c.get()
			oe.mu.Lock()
			oe.now = ts("2026-11-24T08:20Z")
			oe.mu.Unlock()
			if err := oe.e.Step(context.Background(), ts("2026-11-24T08:20Z"), nil); err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("step with its state write failing: %v", err)
			}
			if got := oe.taken(); len(got) != 0 {
				t.Errorf("handed out %q for states not written", got)
			}
			want := writes{Batches: 1, BatchKeys: 6, DelBatches: 1, DelKeys: 6}
			if name == "file, one by one" {
				want = writes{Puts: 6, Deletes: 6}
			}
			after := c.get()
			got := writes{Puts: after.Puts - before.Puts, Deletes: after.Deletes - before.Deletes, Batches: after.Batches - before.Batches,
				BatchKeys: after.BatchKeys - before.BatchKeys, DelBatches: after.DelBatches - before.DelBatches, DelKeys: after.DelKeys - before.DelKeys}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("outbox removals (-want +got):\n%s", d)
			}
			if keys := outboxKeys(t, regs); len(keys) != 0 {
				t.Errorf("outbox after a failed state write: %q", keys)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	slices.Sort(c)
	return c
}

// TestOutboxReleasedInOneBatch: the six deliveries a stop lets go of at
// once (one call of Released) are marked recorded with one batched write
// on either store, one by one on a store without batches (before: one
// write each, and on the file store its syncs); one finished meanwhile by
// another instance (its record gone) is not written back. After a
// restart the five still there are handed out again.
func TestOutboxReleasedInOneBatch(t *testing.T) {
	for name, open := range batchStores(t) {
		t.Run(name, func(t *testing.T) {
			db, regs, c := open(t)
			svc := newFake()
			wdir := threeFeeds(t)
			oe := startOutboxEngine(t, wdir, "2026-11-24T08:00Z", svc, db, nil, OutboxOptions{})
			sent := stepToFailure(t, oe, svc)
			if len(sent) != 6 {
				t.Fatalf("handed out %q, want six failures", sent)
			}
			ids := make([]string, len(sent))
			for i, s := range sent {
				ids[i] = strings.TrimPrefix(s, "failure ")
			}
			var gone string
			for _, k := range outboxKeys(t, regs) {
				if strings.HasSuffix(k, "-"+ids[0]) {
					gone = k
				}
			}
			if err := regs.DeleteRegister(outboxBucket, gone); err != nil {
				t.Fatalf("the record of %s (%q): %v", ids[0], gone, err)
			}
			before := c.get()
			oe.e.Released(ids...)
			got := c.get()
			got.Puts, got.Batches, got.BatchKeys = got.Puts-before.Puts, got.Batches-before.Batches, got.BatchKeys-before.BatchKeys
			got.Deletes, got.DelBatches, got.DelKeys = 0, 0, 0
			want := writes{Batches: 1, BatchKeys: 5}
			if name == "file, one by one" {
				want = writes{Puts: 5}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("outbox writes of the release (-want +got):\n%s", d)
			}
			for _, k := range outboxKeys(t, regs) {
				raw, err := regs.GetRegister(outboxBucket, k)
				var rec outboxRecord
				if err == nil {
					err = json.Unmarshal(raw, &rec)
				}
				if err != nil || !rec.Recorded {
					t.Errorf("record %s after the release: %+v, %v (want recorded)", k, rec, err)
				}
			}
			again := startOutboxEngine(t, wdir, "2026-11-24T08:30Z", svc, db, nil, OutboxOptions{})
			again.step(t, "2026-11-24T08:30Z")
			if d := cmp.Diff(sortedCopy(sent[1:]), sortedCopy(again.taken())); d != "" {
				t.Errorf("handed out after a restart (-want +got):\n%s", d)
			}
		})
	}
}
