package engine

import (
	"testing"

	"github.com/celos-go/celos/internal/testenv/pgtest"
)

// TestMain stops the PostgreSQL server the tests share (pgtest.Shared)
// when they end: without it every run left one running.
func TestMain(m *testing.M) { pgtest.Main(m) }
