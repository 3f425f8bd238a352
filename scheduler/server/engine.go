package server

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/hdfscheck"
	"github.com/celos-go/celos/scheduler/metrics"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/trigger"
)

// openEngine opens the state database (taking its lock) and builds the
// engine over it. Closing the returned closer releases the lock.
func openEngine(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
	var fence statepg.Fence // (a nil *cluster.Cluster is not a nil Fence)
	if d.cluster != nil {
		fence = d.cluster
	}
	db, err := openStore(cfg.DB, fence)
	if err != nil {
		return nil, nil, err
	}
	return newEngine(cfg, d, db)
}

// newEngine builds the engine over the opened store db; on an error db is
// closed.
func newEngine(cfg Config, d deps, db stateStore) (scheduler.Service, io.Closer, error) {
	eng, err := engine.New(engine.Options{
		WorkflowsDir: cfg.Workflows,
		Store:        db,
		Services:     d.services,
		FS:           d.fs,
		Logger:       d.log,
		OnStep: func(r engine.StepReport) {
			d.metrics.RecordStep(r.Transitions, r.Errors, r.Writes)
			pools := make(map[string]metrics.PoolUse, len(r.Pools))
			for name, u := range r.Pools {
				pools[name] = metrics.PoolUse{Limit: u.Limit, Running: u.Running, Waiting: u.Waiting}
			}
			d.metrics.RecordPools(pools)
			for wf, n := range r.SLAMissed {
				for range n {
					d.metrics.SLAMissed(wf)
				}
			}
		},
		PoolsFile: cfg.Pools,
		OnEvent:   d.events,
		Owns:      d.cluster.OwnsFunc(),
	})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("engine: %w", err)
	}
	return eng, db, nil
}

// stateStore is what the server needs of a state store: the engine's
// Store and Registers, and closing it.
type stateStore interface {
	engine.Store
	engine.Registers
	io.Closer
}

// openStore opens the state store --db names: a PostgreSQL database for a
// postgres:// URL or a keyword/value connection string (statepg.IsDSN),
// else the file store in that directory. A PostgreSQL store is connected
// to and migrated here, within its connect timeout; its errors and this
// one name the database without the password.
//
// fence is the cluster's (docs/ha.md), nil with one instance.
func openStore(db string, fence statepg.Fence) (stateStore, error) {
	if statepg.IsDSN(db) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		s, err := statepg.Open(ctx, db, statepg.Options{Fence: fence})
		if err != nil {
			return nil, fmt.Errorf("state database (--db): %w", err)
		}
		return s, nil
	}
	s, err := statedb.Open(db)
	if err != nil {
		return nil, fmt.Errorf("state database %s (--db): %w", db, err)
	}
	return s, nil
}

// describeDB names --db for the log: a directory as an absolute path, a
// PostgreSQL database without its password.
func describeDB(db string) string {
	if statepg.IsDSN(db) {
		return statepg.Redact(db)
	}
	return abs(db)
}

// loadDefaults reads the installation defaults (--defaults: a file, or a
// directory holding defaults.json); nil when none is given.
func loadDefaults(path string) (*defaults.Defaults, error) {
	if path == "" {
		return nil, nil
	}
	return defaults.Load(path)
}

// fileSystems answers hdfsCheck triggers: file: URIs on the local disk,
// hdfs: URIs through one kept client per file system over the Hadoop
// configuration (--hadoop-conf, else $HADOOP_CONF_DIR, else
// $HADOOP_HOME/etc/hadoop). A trigger naming no file system uses
// CELOS_DEFAULT_HDFS from the defaults, else fs.defaultFS. The HDFS
// client's counters are exported as celos_hdfs_*.
func fileSystems(cfg Config, d *defaults.Defaults, m *api.Metrics) (trigger.FileSystems, func(), error) {
	mux, hdfs, err := hdfscheck.Setup(d, cfg.HadoopConf, hdfscheck.Options{Keytab: cfg.Keytab, Principal: cfg.Principal})
	if err != nil {
		return nil, nil, err
	}
	for name, help := range map[string]string{
		"celos_hdfs_calls_total":    "HDFS existence checks made by hdfsCheck triggers.",
		"celos_hdfs_errors_total":   "HDFS existence checks that failed (the trigger was not ready, with the error).",
		"celos_hdfs_connects_total": "Connections opened to HDFS NameNodes.",
	} {
		m.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			st := hdfs.Stats()
			switch name {
			case "celos_hdfs_calls_total":
				return float64(st.Calls)
			case "celos_hdfs_errors_total":
				return float64(st.Errors)
			}
			return float64(st.Connects)
		}))
	}
	return mux, func() { hdfs.Close() }, nil
}
