package statepg

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
)

// openErr opens dsn and expects an error; it checks that the error names
// no password and returns it.
func openErr(t *testing.T, dsn string, opts Options, secrets ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := Open(ctx, dsn, opts)
	if err == nil {
		db.Close()
		t.Fatalf("Open(%s) succeeded", Redact(dsn))
	}
	t.Log(err)
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("the error holds the password %q: %v", s, err)
		}
	}
	return err
}

func TestOpenBadDSN(t *testing.T) {
	for _, dsn := range []string{
		"postgres://celos:S3cretPw@127.0.0.1:notaport/db",
		"host=127.0.0.1 port=99999999 password=S3cretPw dbname=x",
		"postgres://celos:S3cretPw@127.0.0.1:5432/db?sslmode=bogus",
		"host=127.0.0.1 password='S3cretPw Tail4 dbname=x",
	} {
		err := openErr(t, dsn, Options{}, "S3cretPw", "Tail4")
		if !strings.Contains(err.Error(), "bad connection string") {
			t.Errorf("%s: want a bad connection string error, got: %v", Redact(dsn), err)
		}
	}
}

func TestOpenWrongPassword(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := strings.Replace(srv.DSN("postgres"), srv.Password, "Wr0ngPassw0rd", 1)
	err := openErr(t, dsn, Options{}, "Wr0ngPassw0rd", srv.Password)
	if !strings.Contains(err.Error(), "connect") || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("want a clear authentication error, got: %v", err)
	}
}

func TestOpenUnknownDatabase(t *testing.T) {
	srv := pgtest.Shared(t)
	err := openErr(t, srv.DSN("no_such_db"), Options{}, srv.Password)
	if !strings.Contains(err.Error(), `database "no_such_db" does not exist`) {
		t.Fatalf("want the server's word, got: %v", err)
	}
}

// TestOpenUnreachableHost: a host that accepts connections and never
// answers (a hung server, a black-holing firewall) fails Open within the
// connect timeout, not never; a closed port fails at once.
func TestOpenUnreachableHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // never answered
		}
	}()
	done := make(chan error, 1)
	go func() {
		done <- openErr(t, "postgres://celos:pw@"+ln.Addr().String()+"/x?sslmode=disable", Options{ConnectTimeout: time.Second})
	}()
	select {
	case err := <-done:
		if !strings.Contains(err.Error(), "connect") || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("want a connect timeout, got: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("Open did not return: the connect timeout is not applied")
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, c := range held {
		c.Close()
	}
	err = openErr(t, "host=127.0.0.1 port="+addr[strings.LastIndexByte(addr, ':')+1:]+" dbname=x sslmode=disable", Options{})
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("want connection refused, got: %v", err)
	}
}

// TestPasswordFromEnvironment: the password may come from PGPASSWORD or a
// .pgpass file (PGPASSFILE) instead of the DSN, as with libpq.
func TestPasswordFromEnvironment(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	noPw := srv.DSNNoPassword(dbName(dsn))
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("PGPASSWORD", srv.Password)
	openDSN(t, noPw).Close()
	// A keyword/value string, as IsDSN recognises it.
	kw := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", srv.Host, srv.Port, srv.User, dbName(dsn))
	if !IsDSN(kw) {
		t.Fatalf("IsDSN(%q) is false", kw)
	}
	openDSN(t, kw).Close()

	t.Setenv("PGPASSWORD", "")
	os.Unsetenv("PGPASSWORD")
	pass := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(pass, []byte("127.0.0.1:*:*:celos:"+srv.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSFILE", pass)
	openDSN(t, noPw).Close()
}

// TestNewerSchemaRefused: a database migrated by a newer celos (a version
// this one does not know) is refused, naming both versions, and left as it
// is.
func TestNewerSchemaRefused(t *testing.T) {
	db, dsn := openTest(t)
	db.Close()
	ctx := context.Background()
	if err := pgtest.Shared(t).Exec(ctx, dbName(dsn), "INSERT INTO celos_schema_version (version, name, sha256) VALUES (9999, 'future', 'x')"); err != nil {
		t.Fatal(err)
	}
	err := openErr(t, dsn, Options{})
	if !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "9999") {
		t.Fatalf("want ErrSchemaNewer naming 9999, got: %v", err)
	}
}

// TestChangedMigrationRefused: a recorded migration whose checksum differs
// from the embedded file's is refused.
func TestChangedMigrationRefused(t *testing.T) {
	db, dsn := openTest(t)
	db.Close()
	if err := pgtest.Shared(t).Exec(context.Background(), dbName(dsn), "UPDATE celos_schema_version SET sha256 = 'abc' WHERE version = 1"); err != nil {
		t.Fatal(err)
	}
	err := openErr(t, dsn, Options{})
	if !strings.Contains(err.Error(), "migration 0001_state applied to the database differs") {
		t.Fatalf("got: %v", err)
	}
}

// TestRoleWithoutCreate: a role that may not create tables cannot set up
// an empty database (a clear ErrPermission), but may use one its owner
// migrated once it has the table privileges.
func TestRoleWithoutCreate(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	name := dbName(dsn)
	ctx := context.Background()
	role := "lowly_" + name
	if err := srv.Exec(ctx, "postgres", "CREATE ROLE "+role+" LOGIN PASSWORD 'L0wlyPw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Exec(context.Background(), name, "DROP OWNED BY "+role)
		_ = srv.Exec(context.Background(), "postgres", "DROP ROLE IF EXISTS "+role)
	})
	low := strings.Replace(dsn, srv.User+":"+srv.Password, role+":L0wlyPw", 1)
	err := openErr(t, low, Options{}, "L0wlyPw")
	if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "CREATE") {
		t.Fatalf("want ErrPermission with a hint, got: %v", err)
	}
	openDSN(t, dsn).Close() // the owner migrates
	err = openErr(t, low, Options{}, "L0wlyPw")
	if !errors.Is(err, ErrPermission) {
		t.Fatalf("without table privileges: want ErrPermission, got: %v", err)
	}
	if err := srv.Exec(ctx, name, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+role); err != nil {
		t.Fatal(err)
	}
	db := openDSN(t, low)
	if err := db.SetPaused("wf", true); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationsOnce: instances opening a new database together migrate
// it once (the advisory lock), and a second Open applies nothing.
func TestMigrationsOnce(t *testing.T) {
	dsn := pgtest.Shared(t).CreateDB(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := Open(ctx, dsn, Options{})
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	db := openDSN(t, dsn)
	var n, max int
	if err := db.pool.QueryRow(context.Background(), "SELECT count(*), max(version) FROM celos_schema_version").Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if want := len(mustMigrations(t)); n != want || max != SchemaVersion() {
		t.Fatalf("%d migrations recorded up to %d, want %d up to %d", n, max, want, SchemaVersion())
	}
}

func mustMigrations(t *testing.T) []migration {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable":  "postgres://u@h:5432/db?sslmode=disable",
		"postgresql://u@h/db":                        "postgresql://u@h/db",
		"host=h password=secret dbname=d":            "host=h dbname=d",
		"host=h password='se cret\\' x' dbname=d":    "host=h dbname=d",
		"host=h password='wrong pw dbname=d":         "host=h",
		"postgres://h/db?password=secret&sslmode=no": "postgres://h/db?sslmode=no",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	for s, want := range map[string]bool{"postgres://h/db": true, "host=h dbname=d": true, " dbname=d": true,
		"/var/lib/celos/db": false, "db": false, "./a=b": false} {
		if IsDSN(s) != want {
			t.Errorf("IsDSN(%q) = %v", s, !want)
		}
	}
}
