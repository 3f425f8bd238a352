package statepg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// DB is an open PostgreSQL state store. Its methods are safe for
// concurrent use.
//
// Reads are served from an in-memory index of each workflow (loaded on
// first use, or by Preload for many at once: one query per kind of record
// for a whole batch of workflows), so that a step of settled workflows
// costs no query at all. Every write is a transaction that also bumps the
// workflow's row in celos_workflows; the index follows the write after it
// commits, and a workflow whose version moved by more than this instance's
// write (another instance wrote it) is dropped from the index and read
// again on its next use. Refresh does the same for every workflow written
// since the last Refresh, at once (for an instance that takes a workflow
// over).
type DB struct {
	pool    *pgxpool.Pool
	fence   Fence
	timeout time.Duration
	target  string // the DSN without its password, for errors

	writes, reads, fenced atomic.Int64
	// queries counts the round trips to the server (see Queries).
	queries atomic.Int64

	// wmu serializes this instance's writes and loads: a load never
	// straddles a write of this instance (its snapshot and the index it
	// installs agree with every write made since).
	wmu sync.Mutex
	// since is the xmin of the snapshot of the last Refresh (or of Open):
	// the next Refresh reads the workflows written by transactions from
	// there on. Guarded by wmu.
	since uint64
	// probs are the problems the instances published (problems.go).
	probs problemCache

	mu     sync.Mutex // guards the fields below
	closed bool
	// loadFailed is the error of the last load of a workflow, if it
	// failed, at loadFailedAt (see loadBackoff).
	loadFailed   error
	loadFailedAt time.Time
	wfs          map[string]*wfIndex
	paused       map[string]bool
}

// wfIndex is one workflow's records, as of version.
type wfIndex struct {
	version int64 // celos_workflows.version; 0: no row yet
	recs    map[int64]rec
	active  map[int64]struct{}
	reruns  map[int64]time.Time
	intents map[int64]store.Intent
}

type rec struct {
	status slot.Status
	ext    string
	retry  int
}

func newIndex() *wfIndex {
	return &wfIndex{recs: make(map[int64]rec), active: make(map[int64]struct{}),
		reruns: make(map[int64]time.Time), intents: make(map[int64]store.Intent)}
}

func (ix *wfIndex) setRec(k int64, r rec) {
	ix.recs[k] = r
	if r.status.Final() {
		delete(ix.active, k)
	} else {
		ix.active[k] = struct{}{}
	}
}

// errClosed is returned by every use of a closed DB.
var errClosed = errors.New("PostgreSQL state store is closed")

// IsDSN reports whether s names a PostgreSQL database rather than a
// directory: a postgres:// or postgresql:// URL, or a keyword/value
// connection string ("host=db1 dbname=celos").
func IsDSN(s string) bool {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return true
	}
	return keywordDSN.MatchString(s)
}

var keywordDSN = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|sslmode|service|connect_timeout|application_name|options|passfile)\s*=`)

// Redact returns dsn without its password (for logs and errors): a URL's
// user info keeps the user, a keyword string loses its password=… pair.
func Redact(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(an unparsable postgres URL)"
		}
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		if q.Has("password") {
			q.Del("password")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return passwordPair.ReplaceAllString(dsn, "")
}

// passwordPair is a keyword string's password=… pair; an unterminated
// quote runs to the end (it is all password to a reader of the string).
var passwordPair = regexp.MustCompile(`\s*password\s*=\s*('([^'\\]|\\.)*('|$)|\S*)`)

// parseReason is why pgx could not parse dsn, without the connection
// string pgx quotes (its redaction misses a password with an unterminated
// quote) and without any word of the password as Redact finds it.
func parseReason(err error, dsn string) string {
	msg := scrub(err, dsn)
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
	}
	for _, m := range passwordPair.FindAllStringSubmatch(dsn, -1) {
		for _, w := range strings.Fields(strings.Trim(m[1], "'")) {
			if len(w) >= 3 {
				msg = strings.ReplaceAll(msg, w, "xxxxx")
			}
		}
	}
	return msg
}

// Open connects to the database named by dsn (a URL or a keyword/value
// string; a password not in it comes from PGPASSWORD or ~/.pgpass, as libpq
// does), creates or migrates the schema (see migrate) and loads the paused
// flags. It fails, with nothing left open, when the server cannot be
// reached within the connect timeout, the credentials or permissions are
// wrong, or the schema is newer than this celos's. Errors never hold the
// password.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	target := Redact(dsn)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: bad connection string %s: %s", target, parseReason(err, dsn))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
		if cfg.ConnConfig.ConnectTimeout <= 0 {
			cfg.ConnConfig.ConnectTimeout = 10 * time.Second
		}
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "celos"
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	db := &DB{fence: opts.Fence, timeout: opts.OpTimeout, target: target,
		wfs: make(map[string]*wfIndex), paused: make(map[string]bool)}
	if db.timeout <= 0 {
		db.timeout = 30 * time.Second
	}
	// A transaction of this store never waits for its client longer
	// than a call lasts; one that does belongs to a process stopped
	// (SIGSTOP, a VM paused) or cut off in the middle of a write, and its
	// locks — the fence's on the lease rows — would keep every other
	// instance from taking its workflows over until it came back. The
	// server ends such a session.
	if cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] == "" {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(db.timeout.Milliseconds(), 10)
	}
	cfg.ConnConfig.Tracer = counter{&db.queries}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store %s: %s", target, scrub(err, dsn))
	}
	db.pool = pool
	fail := func(what string, err error) (*DB, error) {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL state store %s: %s: %w", target, what, scrubErr(err, dsn))
	}
	// Bounded even if ctx is not: the first connection is where a wrong
	// host or credentials show.
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout+5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		return fail("connect", err)
	}
	if _, err := migrate(pctx, pool); err != nil {
		return fail("schema", err)
	}
	if !opts.IncompleteCopy {
		if err := db.noIncompleteCopy(pctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("PostgreSQL state store %s: %w", target, err)
		}
	}
	if err := db.startSince(pctx); err != nil {
		return fail("read", err)
	}
	if err := db.loadPaused(pctx); err != nil {
		return fail("read", err)
	}
	return db, nil
}

// scrubErr is err with the password, if it appears in its message, taken
// out; the error's identity (errors.Is) is kept.
func scrubErr(err error, dsn string) error {
	pw := password(dsn)
	if pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), pw, "xxxxx"), err: err}
}

func scrub(err error, dsn string) string { return scrubErr(err, dsn).Error() }

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// password is the password written in dsn, if any.
func password(dsn string) string {
	if cfg, err := pgconn.ParseConfig(dsn); err == nil && cfg.Password != "" {
		return cfg.Password
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			return p
		}
	}
	return ""
}

// Close closes the pool. Calls made after it fail.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	db.mu.Unlock()
	db.pool.Close()
	return nil
}

// Pool is the connection pool (for the cluster package's own tables).
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// String names the database, without its password.
func (db *DB) String() string { return db.target }

// Stats counts the rows written and read since Open.
func (db *DB) Stats() store.Stats {
	return store.Stats{Writes: db.writes.Load(), Reads: db.reads.Load()}
}

// Queries counts the statements sent to the server since Open, a batch or
// a COPY counting once: the round trips (BEGIN and COMMIT included).
func (db *DB) Queries() int64 { return db.queries.Load() }

// counter is a pgx tracer that counts round trips.
type counter struct{ n *atomic.Int64 }

func (c counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c counter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c counter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// FencedWrites counts the write transactions the fence refused.
func (db *DB) FencedWrites() int64 { return db.fenced.Load() }

// Problems lists records that could not be read. Rows are checked by the
// schema's constraints, so there are none; it is here for the server,
// which asks every store.
func (db *DB) Problems() []string { return nil }

// ctx is the context of one call of the store.
func (db *DB) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), db.timeout)
}

func (db *DB) loadPaused(ctx context.Context) error {
	rows, err := db.pool.Query(ctx, "SELECT workflow FROM celos_paused")
	if err != nil {
		return pgError(err)
	}
	wfs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return pgError(err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	db.paused = make(map[string]bool, len(wfs))
	for _, wf := range wfs {
		db.paused[wf] = true
	}
	return nil
}

func key(t time.Time) int64 { return t.UnixMilli() }

func keyTime(k int64) time.Time { return time.UnixMilli(k).UTC() }

// ms truncates a wall-clock time to the millisecond, as the file store
// keeps it (its files say .SSSZ): both stores then read back the same.
func ms(t time.Time) time.Time { return keyTime(key(t)) }
