package storetest

import "testing"

// Store is everything the suite checks: what both state stores offer.
type Store interface {
	Buckets
	Records
	Pruner
}

// Run runs every part of the suite on the store open makes (new and
// empty on each call).
func Run(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Registers", func(t *testing.T) {
		RunRegisters(t, func(t *testing.T) Registers { return open(t) })
	})
	t.Run("Buckets", func(t *testing.T) {
		RunBuckets(t, func(t *testing.T) Buckets { return open(t) })
	})
	t.Run("Records", func(t *testing.T) {
		RunRecords(t, func(t *testing.T) Records { return open(t) })
	})
	t.Run("Prune", func(t *testing.T) {
		RunPrune(t, func(t *testing.T) Pruner { return open(t) })
	})
}
