package server

import (
	"testing"

	"github.com/celos-go/celos/internal/testenv/pgtest"
)

// TestMain stops the package's shared PostgreSQL server when its tests end.
func TestMain(m *testing.M) { pgtest.Main(m) }
