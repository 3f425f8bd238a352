package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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

// orphanEnv makes TestPostgresDiesWithItsTestBinary's child start a
// server, print its postmaster's pid and wait to be killed.
const orphanEnv = "CELOS_PGTEST_ORPHAN"

// TestPostgresDiesWithItsTestBinary: a test binary that dies without
// stopping its servers (a panic, go test's -timeout, kill -9) does not
// leave them running: 17 postmasters of killed and interrupted test runs
// were found on this machine, each holding its shared memory and data
// directory.
func TestPostgresDiesWithItsTestBinary(t *testing.T) {
	if os.Getenv(orphanEnv) == "1" {
		srv, err := Start(context.Background(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("postmaster %d %s\n", srv.cmd.Process.Pid, srv.Dir)
		time.Sleep(5 * time.Minute)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresDiesWithItsTestBinary$", "-test.timeout=6m")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pid int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "postmaster %d %s", &pid, &dir); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("the child printed no postmaster pid (%v)", sc.Err())
	}
	defer os.RemoveAll(dir)
	defer syscall.Kill(pid, syscall.SIGKILL) // if the test fails
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("postmaster %d still runs 30 s after its test binary was killed", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Its directory goes at the next Start of any test binary; a live
	// server's stays.
	live := Shared(t)
	removeStale(filepath.Dir(dir))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed binary's directory %s is still there after removeStale (%v)", dir, err)
	}
	if _, err := os.Stat(live.dataDir()); err != nil {
		t.Errorf("removeStale removed a live server's directory: %v", err)
	}
}
