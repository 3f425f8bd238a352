package statepg

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openTest opens the store on an empty database of the shared server.
func openTest(t testing.TB) (*DB, string) {
	t.Helper()
	dsn := pgtest.Shared(t).CreateDB(t)
	return openDSN(t, dsn), dsn
}

func openDSN(t testing.TB, dsn string) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dbName is the database name of a pgtest DSN.
func dbName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
