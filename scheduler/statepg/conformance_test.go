package statepg

import (
	"testing"

	"github.com/celos-go/celos/internal/testenv/storetest"
)

// TestConformance: the PostgreSQL store keeps the promises both stores
// make (internal/testenv/storetest: registers, buckets, owners,
// submissions, prune).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		db, _ := openTest(t)
		return db
	})
}
