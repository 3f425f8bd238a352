// Package server runs `celos server`: it wires the flags to the slot
// engine, the external services, the HTTP API (and the UI), steps the
// scheduler every --autoSchedule seconds, logs to stderr and to daily-rolled
// files, and shuts down gracefully, finishing the step in flight.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/internal/atomicfile"
	"github.com/celos-go/celos/internal/humandur"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/cluster"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/loop"
	"github.com/celos-go/celos/scheduler/metrics"
	"github.com/celos-go/celos/scheduler/notify"
	"github.com/celos-go/celos/scheduler/pool"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// Config is the server's configuration, from the command line.
type Config struct {
	// Listen is the address to bind (default 127.0.0.1); Port the TCP port
	// (0 picks a free one).
	Listen string
	Port   int
	// Workflows is the directory of compiled workflows files (*.json),
	// reloaded at every step. It must exist.
	Workflows string
	// Defaults is the installation defaults file (or a directory holding
	// defaults.json): default file system, Oozie URL and properties; empty
	// means none.
	Defaults string
	// DB is the state database: a directory (the Celos file layout), or a
	// PostgreSQL database (a postgres:// URL or a keyword/value string,
	// see statepg.IsDSN).
	DB string
	// Pools is the installation's pools file (JSON, see docs/server.md),
	// re-read at every step like the workflows; empty means no pools.
	Pools string
	// Jobs is the command service's directory of local runs (records and
	// output logs).
	Jobs string
	// Logs is the directory of celos.log and its daily rolls; empty logs
	// to stderr only.
	Logs string
	// AutoSchedule is the delay between steps; 0 means no automatic steps
	// (cron POSTs /scheduler instead).
	AutoSchedule time.Duration
	// HadoopConf is the directory of core-site.xml and hdfs-site.xml
	// (default $HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop).
	HadoopConf string
	// OozieSPN is Oozie's service principal under Kerberos (default
	// HTTP/<host of the Oozie URL>; see oozie.NewSPNEGO).
	OozieSPN string
	// Keytab and Principal, both set, log the server in to Kerberos with
	// a keytab (HDFS and Oozie) instead of the credential cache, so that
	// its tickets never expire under it.
	Keytab, Principal string
	// UIConfig is the UI's groups file (Celos format); HueURL links Oozie
	// jobs to Hue in the UI.
	UIConfig string
	HueURL   string
	// Version is answered by GET /version.
	Version string
	// URLFile, when set, receives the server's base URL once it listens
	// (for scripts and tests that start it on port 0).
	URLFile string
	// ShutdownTimeout bounds how long a shutdown waits for the step and
	// the requests in flight (default 5 minutes).
	ShutdownTimeout time.Duration
	// Stderr receives the log (default os.Stderr).
	Stderr io.Writer
	// LogLevel is the minimum level logged (default Info).
	LogLevel slog.Level
	// AuthTokenFile holds the API token: when set, every request that
	// changes state (POST, PUT, DELETE: /scheduler, /rerun, /kill, /pause,
	// /register, /clear-cache, and so the UI's actions) needs
	// "Authorization: Bearer <token>"; reads stay open.
	AuthTokenFile string
	// InsecureNoAuthOnPublicAddress lets the server listen on an address
	// other than loopback without AuthTokenFile: anyone who reaches it can
	// then rerun, kill and pause workflows. Without it, such a server
	// refuses to start.
	InsecureNoAuthOnPublicAddress bool
	// StepTimeout is the bound of a scheduler step: GET /healthz answers
	// 503 while a step has been running for longer (default
	// api.DefaultStepTimeout, 10 minutes).
	StepTimeout time.Duration
	// PruneOlderThan, when positive, prunes the state database at start and
	// then daily: the files of final slots older than this (at least
	// statedb.MinRetention), as `celos db prune` does.
	PruneOlderThan time.Duration
	// InstanceID, Lease and JobGrace configure this instance's membership
	// of the cluster of servers sharing a PostgreSQL DB (docs/ha.md):
	// its id (default: the host name), the lease (default
	// cluster.DefaultLease) and how long an instance may miss heartbeats
	// before its command jobs are declared lost (default
	// cluster.DefaultGrace). Unused with the file store.
	InstanceID string
	Lease      time.Duration
	JobGrace   time.Duration
}

// Server timeouts. WriteTimeout is long because POST /scheduler answers
// when its step is done.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = 10 * time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// Run starts the server and blocks until ctx is cancelled (SIGTERM), then
// shuts down: no new steps start, the step in flight and the requests in
// flight finish (up to ShutdownTimeout), the state database is closed.
func Run(ctx context.Context, cfg Config) error {
	return run(ctx, cfg, openEngine)
}

// opener builds the slot engine over the configured directories and the
// external services; closing it releases the state database.
type opener func(cfg Config, d deps) (scheduler.Service, io.Closer, error)

// deps are what the engine is built with.
type deps struct {
	services map[string]external.Service
	fs       trigger.FileSystems
	metrics  *metrics.Metrics
	log      *slog.Logger
	// events receives the events of workflows with notification targets
	// (the webhook sender's Send; it never blocks).
	events func(scheduler.Event)
	// cluster is this instance's membership when several share the
	// database (its fence and Owns); nil with one instance.
	cluster *cluster.Cluster
}

// withDefaults fills in the defaults of the fields left zero.
func (cfg Config) withDefaults() Config {
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1"
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 5 * time.Minute
	}
	if cfg.Jobs == "" && !statepg.IsDSN(cfg.DB) {
		cfg.Jobs = filepath.Join(filepath.Dir(filepath.Clean(cfg.DB)), "jobs")
	}
	return cfg
}

// run is Run with the engine's constructor as a parameter (tests stub it).
// Each part is given only the fields of cfg it needs.
func run(ctx context.Context, cfg Config, open opener) (err error) {
	cfg = cfg.withDefaults()
	ln, err := preflight(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			ln.Close() // serve has not taken it over, or has been stopped
		}
	}()
	log, logCloser, err := NewLogger(cfg.Stderr, cfg.Logs, cfg.LogLevel)
	if err != nil {
		return err
	}
	defer logCloser.Close()
	started := false
	defer func() {
		if err != nil && started {
			log.Error("celos server stopped", "error", err)
		}
	}()
	token, err := authToken(authOptions{TokenFile: cfg.AuthTokenFile, Listen: cfg.Listen, InsecureNoAuth: cfg.InsecureNoAuthOnPublicAddress}, log)
	if err != nil {
		return err
	}
	log.Info("celos server starting", "version", cfg.Version, "workflows", abs(cfg.Workflows), "db", describeDB(cfg.DB),
		"logs", abs(cfg.Logs), "pools", abs(cfg.Pools), "autoSchedule", humandur.Format(cfg.AutoSchedule), "pid", os.Getpid(), "auth", token != "")
	started = true

	inst, err := loadDefaults(cfg.Defaults)
	if err != nil {
		return err
	}
	m := metrics.New()
	// svcs are this host's services (the UI reads command logs from them);
	// the engine's are the cluster's with a PostgreSQL --db (member).
	svcs, engineSvcs, member, err := services(cfg, inst, log)
	if err != nil {
		return err
	}
	fsys, closeFS, err := fileSystems(cfg, inst, m)
	if err != nil {
		return err
	}
	// inUse is set when the shutdown timed out with a step or requests
	// still running: the state database and the file systems are then left
	// open (a step must not write to a closed database); the process's
	// exit releases them.
	inUse := false
	defer func() {
		if !inUse {
			closeFS()
		}
	}()
	// Webhooks go out on the sender's own goroutines; it is closed after
	// the engine's last step and before the leases and the state database
	// go (below, after awaitStop): what it could not deliver stays in the
	// database's outbox. (Deferred too, for the returns before that.)
	sender, closeSender := startNotifier(log, m)
	defer closeSender()
	defer member.close() // after the step loop: its leases go to the others (nil: nothing)
	engine, engineCloser, err := open(cfg, deps{services: m.InstrumentServices(engineSvcs), fs: fsys, metrics: m, log: log, events: sender.Send, cluster: member.membership()})
	if err != nil {
		return err
	}
	defer func() {
		if inUse {
			log.Warn("state database left open: still in use after the shutdown timeout; the process's exit releases it")
			return
		}
		if cerr := engineCloser.Close(); cerr != nil {
			log.Error("close state database", "error", cerr)
		}
	}()
	wireOutbox(engine, sender, m, member.membership())
	if engine, err = member.attach(engine, engineCloser, m); err != nil { // (nil member: unchanged)
		return err
	}
	state, stateRead := startStateLoad(engineCloser, engine, m)
	// One stepper for the --autoSchedule timer and POST /scheduler.
	stepper := loop.New(engine, loop.Options{Metrics: m, Logger: log})
	h := api.New(engine, api.Options{Logger: log, Metrics: m, Stepper: stepper, Version: cfg.Version, StepTimeout: cfg.StepTimeout, Attempts: attemptLister(svcs), Instance: member.status()})
	mux, err := routes(h, engine, svcs, uiOptions{configFile: cfg.UIConfig, workflowsDir: cfg.Workflows, hueURL: cfg.HueURL, version: cfg.Version, tokenRequired: token != "", instance: member.id(), state: state, log: log})
	if err != nil {
		return err
	}
	srv, serveErr := serve(ln, protect(mux, token, hostPolicy(cfg.Listen, token), log), cfg.URLFile, log)

	// The automatic steps run until stop; a step in flight is not
	// cancelled and the loop returns once it is done.
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	jobs, _ := svcs[workflow.ServiceCommand].(jobPruner)
	pruneDone, err := startPruning(loopCtx, engineCloser, stateRead, loadedWorkflows(engine), jobs, cfg.PruneOlderThan, log)
	if err != nil {
		srv.Close()
		return err
	}
	defer func() { stopLoop(); <-pruneDone }()
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		if cfg.AutoSchedule > 0 {
			stepper.Every(loopCtx, cfg.AutoSchedule)
		}
	}()

	var runErr error
	inUse, runErr = awaitStop(ctx, cfg, log, srv, serveErr, loopDone, stopLoop)
	closeSender()
	if runErr != nil {
		return runErr
	}
	logStopped(log, svcs[workflow.ServiceCommand])
	return nil
}

// awaitStop waits for ctx's end (a signal) or for serve to fail, then
// stops the step loop and shuts the server down; inUse is shutdown's.
func awaitStop(ctx context.Context, cfg Config, log *slog.Logger, srv *http.Server, serveErr <-chan error, loopDone <-chan struct{}, stopLoop func()) (inUse bool, err error) {
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing the step and requests in flight", "timeout", humandur.Format(cfg.ShutdownTimeout))
	case serr := <-serveErr:
		err = fmt.Errorf("serve: %w", serr)
	}
	stopLoop()
	inUse, serr := shutdown(srv, loopDone, cfg.ShutdownTimeout)
	if err == nil {
		err = serr
	}
	return inUse, err
}

// logStopped logs the server's last line. Command jobs outlive the server
// (command.Service): the line says how many are still running, and that
// the next start adopts them (reads how they end).
func logStopped(log *slog.Logger, cmd external.Service) {
	r, ok := cmd.(interface{ Running() (int, error) })
	if !ok {
		log.Info("celos server stopped")
		return
	}
	n, err := r.Running()
	switch {
	case err != nil:
		log.Warn("celos server stopped; could not count the command jobs left running", "error", err)
	case n > 0:
		log.Info("celos server stopped, leaving command jobs running: they run on, and the next start adopts them", "commandJobsRunning", n)
	default:
		log.Info("celos server stopped", "commandJobsRunning", 0)
	}
}

// preflight checks what can be checked without creating anything and takes
// the port, before the log, the state database or the jobs directory is
// created: a server that cannot start leaves nothing behind, and says why
// once (the caller prints the error).
func preflight(cfg Config) (net.Listener, error) {
	if fi, err := os.Stat(cfg.Workflows); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("workflows directory %s: must exist and be a directory", cfg.Workflows)
	}
	if err := checkPruneRetention(cfg.PruneOlderThan); err != nil {
		return nil, err
	}
	if err := checkPools(cfg.Pools); err != nil {
		return nil, err
	}
	if cfg.Jobs == "" {
		return nil, fmt.Errorf("--jobs DIR is needed when --db is a PostgreSQL database (the command service's runs and logs are files)")
	}
	deadHolder := 0
	if !statepg.IsDSN(cfg.DB) {
		deadHolder = statedb.DeadHolder(cfg.DB)
	}
	return listen(cfg.Listen, cfg.Port, deadHolder)
}

// deadHolderPortWait is how long listen waits for a port in use when the
// last server on the state directory died (a var for tests).
var deadHolderPortWait = 10 * time.Second

// listen takes the server's port. A port in use is one line with the fix.
// When the last server on the state directory died without closing it
// (deadHolder: its process, gone), a process it had just forked may hold
// its listening socket until it execs (O_CLOEXEC acts then): a restart at
// once waits for the port, deadHolderPortWait at most.
func listen(host string, port, deadHolder int) (net.Listener, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	for deadline := time.Now().Add(deadHolderPortWait); deadHolder > 0 && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		ln, err = net.Listen("tcp", addr)
	}
	if errors.Is(err, syscall.EADDRINUSE) && deadHolder > 0 {
		return nil, fmt.Errorf("listen on %s: the port is in use: the last server on this state directory (process %d) has exited, but a process it started, or another server, still holds the port after %v (find it with `fuser %d/tcp`); choose another with --port, or --port 0 for a free one", addr, deadHolder, deadHolderPortWait, port)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s: the port is in use (another celos server?); choose another with --port, or --port 0 for a free one", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// serve serves handler on ln in the background; Serve's error, if it
// stops by itself, is sent on the channel. The URL is written to urlFile
// (when not empty) once it serves.
func serve(ln net.Listener, handler http.Handler, urlFile string, log *slog.Logger) (*http.Server, <-chan error) {
	url := "http://" + ln.Addr().String()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "url", url)
	if urlFile != "" {
		if err := atomicfile.WriteOutput(urlFile, []byte(url+"\n"), 0o644); err != nil {
			log.Error("write URL file", "file", urlFile, "error", err)
		}
	}
	return srv, serveErr
}

// shutdown stops srv, waiting for the requests in flight, and waits for
// the step loop (loopDone), both within timeout. inUse is true when either
// was still running at the timeout: the state database must then be left
// open. err says which timed out first.
func shutdown(srv *http.Server, loopDone <-chan struct{}, timeout time.Duration) (inUse bool, err error) {
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		inUse = true
		err = fmt.Errorf("shutdown: requests still running after %v: %w", timeout, serr)
	}
	select {
	case <-loopDone:
	case <-sctx.Done():
		select {
		case <-loopDone: // finished just in time
		default:
			inUse = true
			if err == nil {
				err = fmt.Errorf("shutdown: the step in flight was still running after %v", timeout)
			}
		}
	}
	return inUse, err
}

// routes mounts the API, and the UI under /ui/ when it is built in.
func routes(h *api.Handler, svc scheduler.Service, svcs map[string]external.Service, o uiOptions) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	if err := mountUI(mux, o, svc, svcs); err != nil {
		return nil, err
	}
	return mux, nil
}

// startNotifier starts the webhook sender; the function it returns (once;
// later calls do nothing) closes it: it goes on delivering what is queued
// for at most notify.DefaultDrainTimeout (5 s), and leaves the rest in
// the state database's outbox for the next start (wireOutbox).
func startNotifier(log *slog.Logger, m *metrics.Metrics) (*notify.Sender, func()) {
	sender := notify.New(notify.Options{Logger: log, OnResult: m.Notification})
	return sender, sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*notify.DefaultDrainTimeout)
		defer cancel()
		if err := sender.Close(ctx); err != nil {
			log.Warn("webhook deliveries still in flight at exit", "error", err)
		}
	})
}

// outboxEngine is the slot engine's outbox (engine.EnableOutbox).
type outboxEngine interface {
	notify.Outbox
	EnableOutbox(engine.OutboxOptions)
}

// wireOutbox makes the engine keep the sender's deliveries in the state
// database (docs/server.md#webhooks): before the first step, so that
// every event's deliveries are recorded; the deliveries its bounds drop
// are counted as celos_notifications_total{result="dropped"}.
func wireOutbox(svc scheduler.Service, sender *notify.Sender, m *metrics.Metrics, c *cluster.Cluster) {
	e, ok := svc.(outboxEngine)
	if !ok { // (a test's stub)
		return
	}
	e.EnableOutbox(engine.OutboxOptions{OnDrop: func(event string) { m.Notification(event, notify.Dropped) },
		Undeployed: undeployedSender(c)})
	sender.SetOutbox(e)
}

// checkPools refuses to start with a pools file (--pools) that does not
// load: later, while the server runs, a bad version is reported and the
// last good one stays in effect.
func checkPools(path string) error {
	if path == "" {
		return nil
	}
	if _, _, err := pool.NewFile(path).Load(); err != nil {
		return fmt.Errorf("pools file %s (--pools): %w", path, err)
	}
	return nil
}

func abs(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// protect puts the checks every request passes before the handlers
// (api.Protect): the token on requests that change state (when the server
// has one), refusal of cross-site browser requests that change state, and
// refusal of every request whose Host the policy refuses (hostPolicy: DNS
// rebinding).
func protect(h http.Handler, token string, hostOK func(string) bool, log *slog.Logger) http.Handler {
	return api.Protect(h, token, hostOK, log)
}

// undeployedSender is the engine's OutboxOptions.Undeployed: with several
// instances, the deliveries of a workflow this instance does not deploy
// are sent by the live instance that would hold its lease — the one that
// steps it, if another instance's configuration has it (a rolling
// deploy). nil for a nil Cluster (one instance: the engine sends them).
func undeployedSender(c *cluster.Cluster) func(wf string) bool {
	if c == nil {
		return nil
	}
	return func(wf string) bool { return cluster.Owner(wf, c.Live()) == c.ID() }
}
