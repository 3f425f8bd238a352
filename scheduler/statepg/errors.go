package statepg

// The errors of the store: what callers tell apart (ErrPermission,
// scheduler.ErrStoreUnavailable) added to the driver's.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/celos-go/celos/scheduler"
)

// pgError adds ErrPermission and a hint to a server's "permission denied"
// (SQLSTATE 42501), and scheduler.ErrStoreUnavailable to an error that
// says the database cannot be reached (unreachable); it leaves other
// errors as they are.
func pgError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return fmt.Errorf("%w: %s (the role needs CREATE on the database's schema to create or migrate celos's tables, and SELECT, INSERT, UPDATE, DELETE on them; see docs/postgres.md)", ErrPermission, pe.Message)
	}
	if unreachable(err) {
		return &kindError{err: err, kind: scheduler.ErrStoreUnavailable}
	}
	return err
}

// MarkUnavailable returns err wrapped so that it is also
// scheduler.ErrStoreUnavailable when it says the database cannot be
// reached now (see unreachable), and err as it is otherwise: for the
// statements run on the store's database outside the store (the cluster's
// leases), so that callers tell an outage apart from a fault.
func MarkUnavailable(err error) error {
	if unreachable(err) && !errors.Is(err, scheduler.ErrStoreUnavailable) {
		return &kindError{err: err, kind: scheduler.ErrStoreUnavailable}
	}
	return err
}

// unreachable reports whether err says the database cannot be reached
// now: no connection could be made, the connection broke (now or under
// an earlier statement of the transaction) or timed out,
// or the server is shutting down or starting (SQLSTATE class 08, 57P01–
// 57P03).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	return pgconn.Timeout(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) // the connection broke under an earlier statement
}

// kindError is err that is also kind (errors.Is), with err's text.
type kindError struct{ err, kind error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }
