package engine

import (
	"context"

	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
)

// migrateDir copies the file store in dir into pg (benchmarks).
func migrateDir(ctx context.Context, dir string, pg *statepg.DB) error {
	fdb, err := statedb.Open(dir)
	if err != nil {
		return err
	}
	defer fdb.Close()
	_, err = statepg.Migrate(ctx, fdb, pg, nil)
	return err
}
