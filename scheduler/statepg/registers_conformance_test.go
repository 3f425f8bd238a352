package statepg

import (
	"testing"

	"github.com/celos-go/celos/internal/testenv/storetest"
)

// TestRegistersConformance: the registers keep the promises both stores
// make (internal/testenv/storetest).
func TestRegistersConformance(t *testing.T) {
	storetest.RunRegisters(t, func(t *testing.T) storetest.Registers {
		db, _ := openTest(t)
		return db
	})
}

// TestRecordsConformance: owners and submissions keep the promises both
// stores make (internal/testenv/storetest).
func TestRecordsConformance(t *testing.T) {
	storetest.RunRecords(t, func(t *testing.T) storetest.Records {
		db, _ := openTest(t)
		return db
	})
}

// TestPruneConformance: Prune deletes and keeps what both stores promise
// (internal/testenv/storetest).
func TestPruneConformance(t *testing.T) {
	storetest.RunPrune(t, func(t *testing.T) storetest.Pruner {
		db, _ := openTest(t)
		return db
	})
}

// TestBucketsConformance: the buckets listed are those that hold a key,
// in both stores (internal/testenv/storetest).
func TestBucketsConformance(t *testing.T) {
	storetest.RunBuckets(t, func(t *testing.T) storetest.Buckets {
		db, _ := openTest(t)
		return db
	})
}
