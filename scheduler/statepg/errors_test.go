package statepg

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/celos-go/celos/scheduler"
)

// TestPgErrorUnavailable: the errors that say the database cannot be
// reached are scheduler.ErrStoreUnavailable (the API's 503); the others,
// a refused permission or a query's own error, are not.
func TestPgErrorUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connect refused", &pgconn.ConnectError{}, true},
		{"dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"connection lost mid-read", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"connection closed under an earlier statement", fmt.Errorf("pause: %w", pgconn.ErrConnClosed), true},
		{"query canceled", &pgconn.PgError{Code: "57014"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"permission", &pgconn.PgError{Code: "42501"}, false},
		{"I/O error of a file", syscall.EIO, false},
		{"other", errors.New("x"), false},
	} {
		err := pgError(fmt.Errorf("PostgreSQL state store: %w", tc.err))
		if got := errors.Is(err, scheduler.ErrStoreUnavailable); got != tc.want {
			t.Errorf("%s: unavailable = %v, want %v (%v)", tc.name, got, tc.want, err)
		}
		if !errors.Is(err, tc.err) && !errors.Is(err, ErrPermission) {
			t.Errorf("%s: the error %v lost its cause", tc.name, err)
		}
	}
}
