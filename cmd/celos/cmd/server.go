package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/celos-go/celos/internal/humandur"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/cluster"
	"github.com/celos-go/celos/scheduler/server"
)

func init() { register(newServerCmd) }

func newServerCmd() *cobra.Command {
	var (
		cfg          server.Config
		autoSchedule time.Duration
		pruneOlder   time.Duration
		logLevel     string
	)
	c := &cobra.Command{
		Use:   "server",
		Short: "Run the scheduler: HTTP API, web UI and (with --autoSchedule) a step every N seconds",
		Long: `celos server loads the compiled workflows files (*.json, from celos export)
in --workflows, keeps slot states in --db, and serves the HTTP API
(/scheduler, /workflow-slots, /rerun, ... and /openapi.json), /metrics and the
web UI at /ui.

Each step reloads the workflows directory: new, changed and removed files
take effect, and a file that does not load is skipped and reported (in the
log, /workflow-list and the UI) while the others run on. With
--autoSchedule N the server steps at once and then N seconds after each
step ends; without it, POST /scheduler (from cron) steps.

Logs go to stderr and to --logs/celos.log, rolled daily (UTC) to
celos-YYYY-MM-DD.log.

--db is a directory (Celos's file layout, the default) or a PostgreSQL
database: a URL (postgres://celos@db1/celos) or a keyword/value string
("host=db1 dbname=celos user=celos"). Give the password in PGPASSWORD or
~/.pgpass rather than on the command line; it is never logged. The schema
is created or migrated at start-up; a server that cannot connect, or meets
a newer schema or a role without the privileges it needs, does not start.
With PostgreSQL, --jobs is required. See docs/postgres.md.

With --auth-token-file, every request that changes state (POST /scheduler,
/rerun, /kill, /pause, /clear-cache, PUT and DELETE /register, and so the
UI's actions) needs "Authorization: Bearer <token>"; reads stay open. The
client commands send $CELOS_TOKEN or the content of --token-file. Without a
token the server listens on loopback only, unless started with
--insecure-no-auth-on-public-address, and answers only requests whose Host
is localhost or a loopback address (421 otherwise: DNS rebinding).

GET /healthz answers 503 while a step has been running for longer than
--step-timeout (a read that hangs, say); /metrics has the step's running
time as celos_step_running_seconds.

Several servers can share one PostgreSQL --db (docs/ha.md): each steps
the workflows whose lease it holds (--instance-id, --lease), they take
over from each other when one stops, and every one serves the whole API
and UI.

SIGTERM or SIGINT stops it gracefully: the step and
the requests in flight finish first (a second signal stops it at once).`,
		Example: `  celos server --port 8080 --workflows /etc/celos/workflows --db /var/lib/celos/db --autoSchedule 60
  celos server --listen 0.0.0.0 --auth-token-file /etc/celos/token --workflows /etc/celos/workflows --db /var/lib/celos/db
  PGPASSFILE=/etc/celos/pgpass celos server --workflows /etc/celos/workflows --db postgres://celos@db1/celos --jobs /var/lib/celos/jobs`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := splitListen(&cfg, c.Flags().Changed("port")); err != nil {
				return err
			}
			if cfg.Port < 0 || cfg.Port > 65535 {
				return usageError("--port %d: want 0..65535", cfg.Port)
			}
			cfg.AutoSchedule = autoSchedule
			level, err := parseLogLevel(logLevel)
			if err != nil {
				return err
			}
			cfg.LogLevel = level
			cfg.PruneOlderThan = pruneOlder
			if err := checkServerFlags(cfg); err != nil {
				return err
			}
			cfg.Version = version()
			cfg.Stderr = c.ErrOrStderr()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				stop() // a second signal kills the process
			}()
			if err := server.Run(ctx, cfg); err != nil {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("server: %w", err)}
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Port, "port", 8080, "HTTP port (0 picks a free one)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1", "address to listen on (0.0.0.0 for every interface; host:port sets --port too)")
	f.StringVar(&cfg.Workflows, "workflows", "/etc/celos/workflows", "directory of compiled workflows files (*.json); must exist")
	f.StringVar(&cfg.Defaults, "defaults", "", "installation defaults: CELOS_DEFAULT_HDFS, CELOS_DEFAULT_OOZIE, CELOS_DEFAULT_OOZIE_PROPERTIES (a JSON file, or a directory holding defaults.json; see docs/oozie.md)")
	f.StringVar(&cfg.Pools, "pools", "", `pools file {"pools": {"etl": {"limit": 4}}}: the running slots of a pool's workflows never exceed its limit; re-read at every step (see docs/server.md)`)
	f.StringVar(&cfg.DB, "db", "/var/lib/celos/db", "state database: a directory (created if missing, locked while the server runs) or a PostgreSQL URL or connection string (docs/postgres.md)")
	f.StringVar(&cfg.Logs, "logs", "/var/log/celos", "directory of celos.log and its daily rolls (empty: stderr only)")
	f.StringVar(&cfg.Jobs, "jobs", "", "directory of the command service's runs and output logs (default: jobs beside --db)")
	f.Var(newDurationFlag(&autoSchedule, 0, true), "autoSchedule", "time between automatic steps: seconds (60, as Celos) or a duration (90s, 5m); 0: none, POST /scheduler steps")
	f.StringVar(&cfg.HadoopConf, "hadoop-conf", "", "directory of core-site.xml and hdfs-site.xml (default $HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop)")
	f.StringVar(&cfg.Keytab, "keytab", "", "under Kerberos, log in with this keytab (with --principal) instead of the credential cache, for HDFS and Oozie")
	f.StringVar(&cfg.Principal, "principal", "", "the Kerberos principal of --keytab (user@REALM)")
	f.StringVar(&cfg.OozieSPN, "oozie-spn", "", "Oozie's Kerberos service principal when --hadoop-conf has hadoop.security.authentication=kerberos (default HTTP/<host of the Oozie URL>; _HOST is that host)")
	f.StringVar(&cfg.UIConfig, "ui-config", "", `UI groups file, Celos format {"groups":[{"name":..., "workflows":[...]}]}`)
	f.StringVar(&cfg.HueURL, "hue", "", "Hue URL: the UI links Oozie jobs to it")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&cfg.AuthTokenFile, "auth-token-file", "", "file holding the API token: POST/PUT/DELETE requests (steps, rerun, kill, pause, registers, UI actions) need Authorization: Bearer <token>; reads stay open")
	f.BoolVar(&cfg.InsecureNoAuthOnPublicAddress, strings.TrimPrefix(server.InsecureFlag, "--"), false,
		"INSECURE: allow --listen on a non-loopback address without --auth-token-file (anyone who reaches it can change state)")
	f.Var(newDurationFlag(&pruneOlder, 0, false), "prune-older-than", "prune at start and daily: final slots older than this (30d, 2w; at least 8d), as celos db prune, and the command service's records and logs of runs that old")
	f.Var(newDurationFlag(&cfg.StepTimeout, api.DefaultStepTimeout, false), "step-timeout", "bound of a scheduler step: /healthz answers 503 while a step has been running longer (a hung read, say)")
	f.StringVar(&cfg.InstanceID, "instance-id", "", "with a PostgreSQL --db: this instance's id among the servers sharing it, the same across restarts (default: the host name)")
	f.Var(newDurationFlag(&cfg.Lease, cluster.DefaultLease, false), "lease", "with a PostgreSQL --db: how long a workflow's lease and a heartbeat last without renewal; another instance takes over within about 1⅓ leases")
	f.Var(newDurationFlag(&cfg.JobGrace, 0, false), "job-grace", "with a PostgreSQL --db: how long an instance may miss heartbeats before its running command jobs are declared lost (default: max(1m, 4×lease))")
	f.StringVar(&cfg.URLFile, "url-file", "", "write the server's base URL to this file once it listens")
	_ = f.MarkHidden("url-file")
	return c
}

// parseLogLevel reads --log-level.
func parseLogLevel(v string) (slog.Level, error) {
	switch strings.ToLower(v) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, usageError("--log-level %q: want debug, info, warn or error", v)
}

// checkServerFlags refuses the flag values server.Run cannot work with.
func checkServerFlags(cfg server.Config) error {
	switch {
	case cfg.AutoSchedule != 0 && cfg.AutoSchedule < time.Second:
		// Below a second the server steps in a busy loop (and fills its
		// log); Celos took whole seconds.
		return usageError("--autoSchedule %s: want at least 1s (or 0: no automatic steps)", humandur.Format(cfg.AutoSchedule))
	case cfg.StepTimeout <= 0:
		return usageError("--step-timeout %s: want a positive duration (10m, 1h)", humandur.Format(cfg.StepTimeout))
	case cfg.PruneOlderThan < 0:
		return usageError("--prune-older-than %s: want a positive duration such as 30d", humandur.Format(cfg.PruneOlderThan))
	case cfg.Lease < cluster.MinLease:
		return usageError("--lease %s: want at least %s", humandur.Format(cfg.Lease), humandur.Format(cluster.MinLease))
	case cfg.JobGrace < 0:
		return usageError("--job-grace %s: want a positive duration such as 5m", humandur.Format(cfg.JobGrace))
	case (cfg.Keytab == "") != (cfg.Principal == ""):
		return usageError("--keytab and --principal go together: give both, or neither to use the credential cache")
	}
	return nil
}

// splitListen takes a port given with --listen (127.0.0.1:8080,
// [::1]:8080), as most servers' listen flags take it: the host stays in
// cfg.Listen and the port goes to cfg.Port, unless --port gives another.
func splitListen(cfg *server.Config, portSet bool) error {
	host, p, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		// No port: a host name, an address, or an IPv6 one in brackets.
		if h := cfg.Listen; strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			cfg.Listen = h[1 : len(h)-1]
		}
		return nil
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		if err != nil {
			p = strconv.Quote(p)
		}
		return usageError("--listen %s: port %s: want 0..65535", cfg.Listen, p)
	}
	if portSet && port != cfg.Port {
		return usageError("--listen %s names port %d and --port %d: give the port once", cfg.Listen, port, cfg.Port)
	}
	cfg.Listen, cfg.Port = host, port
	return nil
}
