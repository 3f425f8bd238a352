package server

// Several instances on one PostgreSQL database (docs/ha.md): the
// membership and leases (scheduler/cluster), the command jobs' rows, the
// engine wrapper that runs operators' actions exclusively of the steps,
// and the metrics.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/cluster"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/metrics"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// instance is this server's membership of a cluster.
type instance struct {
	c    *cluster.Cluster
	jobs *cluster.Jobs // nil: no command service
	pool *pgxpool.Pool
	log  *slog.Logger

	mu    sync.Mutex
	svc   *engine.Engine // set once the engine is built (Workflows)
	store refresher      // the state store, when it can refresh
	stop  context.CancelFunc
	done  chan struct{}
}

// refresher is a store that keeps an index and can bring it up to date
// with other instances' writes (statepg.DB.Refresh).
type refresher interface {
	Refresh(ctx context.Context) (int, error)
}

// newInstance prepares the membership of a cluster on the PostgreSQL
// database dsn (its own small pool: heartbeats do not queue behind the
// store's queries). Nothing is written before start.
func newInstance(dsn string, cfg Config, log *slog.Logger) (*instance, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cluster (--db): %w", err)
	}
	pc.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("cluster (--db): %w", err)
	}
	in := &instance{pool: pool, log: log}
	in.c, err = cluster.New(pool, cluster.Options{ID: cfg.InstanceID, Lease: cfg.Lease, Logger: log, Workflows: in.workflows})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return in, nil
}

// workflows are the workflows the cluster shares out: the loaded ones and
// those no longer deployed whose slots still run (engine.LeasedIDs).
func (in *instance) workflows() []string {
	in.mu.Lock()
	e := in.svc
	in.mu.Unlock()
	if e == nil {
		return nil
	}
	return e.LeasedIDs()
}

// services builds this host's external services (externalServices) and,
// when --db is a PostgreSQL database, this server's membership of the
// cluster sharing it (nil otherwise) and the services the engine is to
// use (the command service with job rows).
func services(cfg Config, d *defaults.Defaults, log *slog.Logger) (local, forEngine map[string]external.Service, member *instance, err error) {
	local, err = externalServices(cfg, d, log)
	if err != nil || !statepg.IsDSN(cfg.DB) {
		return local, local, nil, err
	}
	member, err = newInstance(cfg.DB, cfg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return local, member.wrapServices(local, cfg.JobGrace), member, nil
}

// membership is the cluster, nil for a nil instance.
func (in *instance) membership() *cluster.Cluster {
	if in == nil {
		return nil
	}
	return in.c
}

// status is what /healthz shows of the instance (nil: none).
func (in *instance) status() func() any {
	if in == nil {
		return nil
	}
	return func() any { return in.c.Status() }
}

// id is the instance id ("" for none).
func (in *instance) id() string {
	if in == nil {
		return ""
	}
	return in.c.ID()
}

// attach starts the instance over the engine svc and its state store
// and returns the engine the server serves (clustered); a nil instance
// returns svc.
func (in *instance) attach(svc scheduler.Service, store any, m *metrics.Metrics) (scheduler.Service, error) {
	if in == nil {
		return svc, nil
	}
	e, ok := svc.(*engine.Engine)
	if !ok {
		return nil, fmt.Errorf("cluster: the server's engine is a %T, not the slot engine", svc)
	}
	in.store, _ = store.(refresher)
	if err := in.start(e); err != nil {
		return nil, err
	}
	in.register(m)
	return &clustered{Engine: e, c: in.c, store: in.store}, nil
}

// wrapServices returns the engine's services: the command service becomes
// the cluster's (job rows, lost jobs), the others are unchanged.
func (in *instance) wrapServices(svcs map[string]external.Service, grace time.Duration) map[string]external.Service {
	out := make(map[string]external.Service, len(svcs))
	for k, v := range svcs {
		out[k] = v
	}
	if local, ok := svcs[workflow.ServiceCommand].(cluster.LocalJobs); ok {
		in.jobs = cluster.NewJobs(in.c, local, cluster.JobsOptions{Grace: grace})
		out[workflow.ServiceCommand] = in.jobs
	}
	return out
}

// start joins the cluster (waiting, within 3 leases, for a previous
// process under the same id to go stale), takes this instance's share of
// the workflows of e, and keeps renewing in the background until close.
func (in *instance) start(e *engine.Engine) error {
	in.mu.Lock()
	in.svc = e
	in.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*in.c.Lease())
	defer cancel()
	if err := in.c.Join(ctx); err != nil {
		return err
	}
	if err := in.c.Tick(ctx); err != nil {
		in.log.Warn("first cluster tick failed; retrying", "error", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	in.stop, in.done = stop, make(chan struct{})
	go func() {
		defer close(in.done)
		var wg sync.WaitGroup
		if in.jobs != nil {
			wg.Go(func() { in.jobs.Run(runCtx) })
		}
		if in.store != nil {
			wg.Go(func() { in.refreshReads(runCtx) })
		}
		if err := in.c.Run(runCtx); err != nil {
			in.log.Error("cluster membership ended", "error", err)
		}
		wg.Wait()
	}()
	in.log.Info("cluster instance started", "instance", in.c.ID(), "lease", in.c.Lease().String(), "live", in.c.Live(), "owned", len(in.c.Owned()))
	return nil
}

// refreshReads brings the store's index up to date with the other
// instances' writes every lease/3, so that this instance's API and UI
// show the workflows it does not step at most that stale.
func (in *instance) refreshReads(ctx context.Context) {
	t := time.NewTicker(in.c.Lease() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, in.c.Lease())
		if _, err := in.store.Refresh(rctx); err != nil && ctx.Err() == nil {
			in.log.Debug("state store not refreshed; next time", "error", err)
		}
		cancel()
	}
}

// close leaves the cluster (its leases go to the others at their next
// tick) and closes the pool. Call it once no step runs any more. A nil
// instance does nothing.
func (in *instance) close() {
	if in == nil {
		return
	}
	if in.stop != nil {
		in.stop()
		<-in.done
	}
	in.pool.Close()
}

// register exports the instance's figures on /metrics.
func (in *instance) register(m *metrics.Metrics) {
	reg := m.Registry()
	c := in.c
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "celos_cluster_info",
		Help: "1, labelled with this instance's id (--instance-id).", ConstLabels: prometheus.Labels{"instance": c.ID()}},
		func() float64 { return 1 }))
	gauges := map[string]struct {
		help string
		f    func() float64
	}{
		"celos_cluster_owned_workflows": {"Workflows this instance holds the lease of (steps).", func() float64 { return float64(len(c.Owned())) }},
		"celos_cluster_live_instances":  {"Live instances as of this instance's last tick.", func() float64 { return float64(len(c.Live())) }},
		"celos_cluster_clock_offset_seconds": {"This host's clock minus the database's at the last heartbeat.", func() float64 {
			off, _ := c.ClockOffset()
			return off.Seconds()
		}},
		"celos_cluster_clock_skewed": {"1 while this host's clock is more than 1 s off the database's: the instance steps no workflow until they agree.", func() float64 {
			if _, far := c.ClockOffset(); far {
				return 1
			}
			return 0
		}},
	}
	for name, g := range gauges {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: g.help}, g.f))
	}
	counters := map[string]struct {
		help string
		f    func(cluster.Stats) int64
	}{
		"celos_cluster_lease_renewals_total": {"Leases renewed (one per workflow per renewal).", func(s cluster.Stats) int64 { return s.Renewals }},
		"celos_cluster_takeovers_total":      {"Leases taken over from an expired holder.", func(s cluster.Stats) int64 { return s.TakeOvers }},
		"celos_cluster_leases_lost_total":    {"Leases found expired or taken at renewal.", func(s cluster.Stats) int64 { return s.Lost }},
		"celos_cluster_fenced_writes_total":  {"Writes refused because this instance no longer held the workflow's lease.", func(s cluster.Stats) int64 { return s.Fenced }},
	}
	for name, k := range counters {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: k.help}, func() float64 { return float64(k.f(c.Stats())) }))
	}
}

// clustered is the engine of an instance in a cluster: steps begin by
// adopting the tokens operators' writes advanced (cluster.BeginStep), and
// rerun, kill and pause run exclusively of them, with the fence letting
// their writes through for workflows another instance holds.
type clustered struct {
	*engine.Engine
	c     *cluster.Cluster
	store refresher  // nil: a store without an index
	mu    sync.Mutex // serializes steps and operators' actions
}

var _ scheduler.Service = (*clustered)(nil)

// Step begins the step (cluster.BeginStep), refreshes the store's index
// (a workflow taken over may have been written by another instance: the
// step must not decide on what this instance read before), then steps.
func (s *clustered) Step(ctx context.Context, now time.Time, ids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.c.BeginStep(ctx); err != nil {
		return fmt.Errorf("%w: %w", engine.ErrPersist, err)
	}
	if s.store != nil {
		if _, err := s.store.Refresh(ctx); err != nil {
			return fmt.Errorf("%w: %w", engine.ErrPersist, err)
		}
	}
	return s.Engine.Step(ctx, now, ids)
}

func (s *clustered) operator(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Operator(f)
}

func (s *clustered) Rerun(ctx context.Context, id slot.ID, now time.Time) error {
	return s.operator(func() error { return s.Engine.Rerun(ctx, id, now) })
}

func (s *clustered) Kill(ctx context.Context, id slot.ID) error {
	return s.operator(func() error { return s.Engine.Kill(ctx, id) })
}

func (s *clustered) SetPaused(ctx context.Context, id string, paused bool) error {
	return s.operator(func() error { return s.Engine.SetPaused(ctx, id, paused) })
}
