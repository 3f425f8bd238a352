package cluster

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/celos-go/celos/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// migration is the cluster schema (the statepg migration this package owns).
// migration is the cluster's part of statepg's schema: 0002_cluster.sql
// and 0005_unstarted_jobs.sql, in order.
func migration(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	var all strings.Builder
	for _, name := range []string{"0002_cluster.sql", "0005_unstarted_jobs.sql"} {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "statepg", "migrations", name))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(data)
		all.WriteString("\n")
	}
	return all.String()
}

// newDB creates a database on the shared server with the cluster schema
// and returns its DSN.
func newDB(t testing.TB) string {
	t.Helper()
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	applySchema(t, dsn)
	return dsn
}

func applySchema(t testing.TB, dsn string) {
	t.Helper()
	p := openPool(t, dsn)
	if _, err := p.Exec(ctxT(t), migration(t)); err != nil {
		t.Fatalf("applying the cluster migrations: %v", err)
	}
}

func openPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// ctxT is a context bounded by a generous deadline for one test operation.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// member makes and joins an instance.
func member(t testing.TB, pool *pgxpool.Pool, id string, lease time.Duration, wfs ...string) *Cluster {
	t.Helper()
	c, err := New(pool, Options{ID: id, Host: "host-" + id, Lease: lease, Workflows: func() []string { return wfs }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Join(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

func tick(t testing.TB, cs ...*Cluster) {
	t.Helper()
	for _, c := range cs {
		if err := c.Tick(ctxT(t)); err != nil {
			t.Fatalf("tick of %s: %v", c.ID(), err)
		}
	}
}

// eventually polls cond every 20 ms until it holds or the (generous)
// deadline passes.
func eventually(t testing.TB, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("not within %s: %s", deadline, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// write runs a fenced write transaction for workflows as c: an insert into
// a table writes(instance, workflow), committed only if Check passes.
func write(ctx context.Context, pool *pgxpool.Pool, c *Cluster, wfs ...string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS writes (instance text, workflow text)`); err != nil {
		return err
	}
	for _, wf := range wfs {
		if _, err := tx.Exec(ctx, `INSERT INTO writes VALUES ($1, $2)`, c.ID(), wf); err != nil {
			return err
		}
	}
	if err := c.Check(ctx, tx, wfs); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// leaseRow is a workflow's lease as stored.
type leaseRow struct {
	Holder string
	Token  int64
}

func leases(t testing.TB, pool *pgxpool.Pool) map[string]leaseRow {
	t.Helper()
	rows, err := pool.Query(ctxT(t), `SELECT workflow, holder, token FROM cluster_leases`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[string]leaseRow)
	for rows.Next() {
		var wf string
		var r leaseRow
		if err := rows.Scan(&wf, &r.Holder, &r.Token); err != nil {
			t.Fatal(err)
		}
		out[wf] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newDBNoSchema(t testing.TB) string {
	t.Helper()
	return pgtest.Shared(t).CreateDB(t)
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
