package statedb

import (
	"testing"

	"github.com/celos-go/celos/internal/testenv/storetest"
)

// TestConformance: the file store keeps the promises both stores make
// (internal/testenv/storetest: registers, buckets, owners, submissions,
// prune).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return open(t, t.TempDir()) })
}
