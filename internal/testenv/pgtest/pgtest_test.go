package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestCreateDBIsolatedAndPasswordChecked(t *testing.T) {
	srv := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := srv.CreateDB(t), srv.CreateDB(t)
	if a == b {
		t.Fatalf("two CreateDB calls gave the same database %s", Redact(a))
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE x (v int); INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	connB, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer connB.Close(ctx)
	var n int
	if err := connB.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'x'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("database b sees table x of database a: n=%d err=%v", n, err)
	}
	// Password authentication is on: a wrong password is refused.
	bad := srv.DSNNoPassword("postgres") + "&password=wrong"
	if c, err := pgx.Connect(ctx, bad); err == nil {
		c.Close(ctx)
		t.Fatal("a wrong password was accepted: authentication is not checked")
	}
}

func TestKillAndRestartKeepData(t *testing.T) {
	srv := StartT(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.Exec(ctx, "postgres", "CREATE TABLE kept (v int)", "INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if srv.Running() {
		t.Fatal("Running after Kill")
	}
	if _, err := pgx.Connect(ctx, srv.DSN("postgres")); err == nil {
		t.Fatal("connected to a killed server")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: v=%d err=%v, want 42", v, err)
	}
}
