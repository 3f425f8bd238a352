package cluster

import "github.com/celos-go/celos/scheduler/statepg"

// ErrFenced is wrapped by Check's refusals: statepg's, so that the store
// and its callers tell a fenced write apart (errors.Is).
var ErrFenced = statepg.ErrFenced

var _ statepg.Fence = (*Cluster)(nil)
