// Package faultstore wraps a real state database so that tests can make
// one read fail as a disk does, which a real file store cannot be made to
// do on demand.
package faultstore

import (
	"fmt"
	"syscall"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
)

// EIO is db with the read of slot Bad failing with syscall.EIO (an I/O
// error, not a record that does not parse); every other operation is the
// database's.
type EIO struct {
	*statedb.DB
	Bad slot.ID
}

// Get is the database's, but for Bad.
func (s EIO) Get(id slot.ID) (slot.State, bool, error) {
	if id.Workflow == s.Bad.Workflow && id.Time.Equal(s.Bad.Time) {
		return slot.State{}, false, fmt.Errorf("state database: read %s: %w", id, syscall.EIO)
	}
	return s.DB.Get(id)
}
