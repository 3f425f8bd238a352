package engine

// The register operations of scheduler.Service, over Options.Registers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// errNoRegisters: the engine's store has no registers.
var errNoRegisters = errors.New("the state store keeps no registers")

func registerErr(err error) error {
	switch {
	case errors.Is(err, store.ErrBadName):
		return fmt.Errorf("%w: %v", slot.ErrBadParameter, err)
	case errors.Is(err, store.ErrNotFound):
		// statedb says "not found: register b/k"; keep only what it names.
		return fmt.Errorf("%w: %s", scheduler.ErrRegisterNotFound, strings.TrimPrefix(err.Error(), store.ErrNotFound.Error()+": "))
	}
	return err
}

// GetRegister returns the JSON under bucket/key (scheduler.ErrRegisterNotFound if none).
// The outbox's records are not read through it (they name the webhook
// targets' URLs, whose query or user information may hold a token, and
// a read needs no token), nor the departures' and the definitions'
// (workflow definitions): their keys are listed, their values refused.
func (e *Engine) GetRegister(ctx context.Context, bucket, key string) (json.RawMessage, error) {
	switch bucket {
	case outboxBucket:
		return nil, fmt.Errorf("%w: %s holds webhook deliveries, whose target URLs may carry tokens: list its keys, or read the state database", scheduler.ErrReservedBucket, bucket)
	case departedBucket:
		return nil, fmt.Errorf("%w: %s holds the definitions of workflows that left while their slots ran (Oozie properties included): list its keys, or read the state database", scheduler.ErrReservedBucket, bucket)
	case definedBucket:
		return nil, fmt.Errorf("%w: %s holds the definitions of workflows that submitted jobs (Oozie properties included): list its keys, or read the state database", scheduler.ErrReservedBucket, bucket)
	}
	v, err := e.regs.GetRegister(bucket, key)
	return v, registerErr(err)
}

// PutRegister stores a JSON value under bucket/key (not in a reserved
// bucket).
func (e *Engine) PutRegister(ctx context.Context, bucket, key string, value json.RawMessage) error {
	if err := writable(bucket); err != nil {
		return err
	}
	return registerErr(e.regs.PutRegister(bucket, key, value))
}

// DeleteRegister removes bucket/key (not in a reserved bucket).
func (e *Engine) DeleteRegister(ctx context.Context, bucket, key string) error {
	if err := writable(bucket); err != nil {
		return err
	}
	return registerErr(e.regs.DeleteRegister(bucket, key))
}

// DeleteRegistersWithPrefix removes every key of bucket that starts with
// prefix (not in a reserved bucket).
func (e *Engine) DeleteRegistersWithPrefix(ctx context.Context, bucket, prefix string) error {
	if err := writable(bucket); err != nil {
		return err
	}
	return registerErr(e.regs.DeleteRegistersWithPrefix(bucket, prefix))
}

// writable refuses the buckets the engine keeps its own records in
// (ReservedBuckets): a write there from the API would send an SLA miss
// again, or forge or remove a webhook delivery. (Reading: GetRegister.)
func writable(bucket string) error {
	for _, b := range ReservedBuckets {
		if bucket == b {
			return fmt.Errorf("%w: %s holds the scheduler's own records (read-only through the API)", scheduler.ErrReservedBucket, bucket)
		}
	}
	return nil
}

// RegisterKeys lists the keys of bucket starting with prefix, sorted.
func (e *Engine) RegisterKeys(ctx context.Context, bucket, prefix string) ([]string, error) {
	k, err := e.regs.RegisterKeys(bucket, prefix)
	return k, registerErr(err)
}

// noRegisters stands for the registers of a store that keeps none.
type noRegisters struct{}

func (noRegisters) GetRegister(bucket, key string) (json.RawMessage, error) {
	return nil, errNoRegisters
}
func (noRegisters) PutRegister(bucket, key string, value json.RawMessage) error {
	return errNoRegisters
}
func (noRegisters) DeleteRegister(bucket, key string) error               { return errNoRegisters }
func (noRegisters) DeleteRegistersWithPrefix(bucket, prefix string) error { return errNoRegisters }
func (noRegisters) RegisterKeys(bucket, prefix string) ([]string, error)  { return nil, errNoRegisters }

// putRegisters writes kv into bucket, in one batch where the store can
// (registerBatcher), otherwise one by one in key order, and returns the
// keys it could not write.
func putRegisters(regs Registers, bucket string, kv map[string]json.RawMessage) map[string]error {
	if b, ok := regs.(registerBatcher); ok {
		return b.PutRegisters(bucket, kv)
	}
	var failed map[string]error
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		if err := regs.PutRegister(bucket, k, kv[k]); err != nil {
			if failed == nil {
				failed = make(map[string]error)
			}
			failed[k] = err
		}
	}
	return failed
}

// deleteRegisters removes keys from bucket, in one batch where the store
// can, otherwise one by one, and returns the keys it could not remove.
func deleteRegisters(regs Registers, bucket string, keys []string) map[string]error {
	if b, ok := regs.(registerBatcher); ok {
		return b.DeleteRegisters(bucket, keys)
	}
	var failed map[string]error
	for _, k := range keys {
		if err := regs.DeleteRegister(bucket, k); err != nil {
			if failed == nil {
				failed = make(map[string]error)
			}
			failed[k] = err
		}
	}
	return failed
}
