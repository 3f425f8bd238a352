package statedb

import (
	"testing"

	"github.com/celos-go/celos/internal/testenv/storetest"
)

// TestRegistersConformance: the registers keep the promises both stores
// make (internal/testenv/storetest).
func TestRegistersConformance(t *testing.T) {
	storetest.RunRegisters(t, func(t *testing.T) storetest.Registers { return open(t, t.TempDir()) })
}
