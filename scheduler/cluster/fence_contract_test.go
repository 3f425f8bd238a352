package cluster

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// fence is statepg.Fence as PG.md declares it. TEMPORARY: replaced by
// `var _ statepg.Fence = (*Cluster)(nil)` once scheduler/statepg/fence.go
// is on main.
type fence interface {
	Check(ctx context.Context, tx pgx.Tx, workflows []string) error
}

var _ fence = (*Cluster)(nil)
