package statepg

// What a copy checks of the database before it writes: no server
// instance live on it, and the record of a migrate that did not finish.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/slot"
)

// ErrIncompleteCopy: the database holds part of a state, left by a
// celos db migrate that did not finish (Open without IncompleteCopy).
var ErrIncompleteCopy = errors.New("a celos db migrate into the database did not finish")

// noIncompleteCopy fails with ErrIncompleteCopy, naming the migrate's
// source, if an interrupted migrate left its row.
func (db *DB) noIncompleteCopy(ctx context.Context) error {
	var source string
	var started time.Time
	err := db.pool.QueryRow(ctx, "SELECT source, started FROM celos_incomplete_copy").Scan(&source, &started)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read celos_incomplete_copy: %w", pgError(err))
	}
	return fmt.Errorf("%w (from %s, started %s): it holds part of that state, and a server on it would run the missing workflows' slots again; run celos db migrate --from %s again to complete it",
		ErrIncompleteCopy, source, slot.FormatTime(started.UTC()), source)
}

// markCopy records (begin) or clears the interrupted-migrate row.
func (db *DB) markCopy(ctx context.Context, source string, begin bool) error {
	ctx, cancel := context.WithTimeout(ctx, db.timeout)
	defer cancel()
	var err error
	if begin {
		_, err = db.pool.Exec(ctx, `INSERT INTO celos_incomplete_copy (source) VALUES ($1)
ON CONFLICT (one) DO UPDATE SET source = EXCLUDED.source, started = clock_timestamp()`, source)
	} else {
		_, err = db.pool.Exec(ctx, "DELETE FROM celos_incomplete_copy")
	}
	if err != nil {
		return fmt.Errorf("PostgreSQL state store %s: record the migrate in celos_incomplete_copy: %w", db.target, pgError(err))
	}
	return nil
}

// ErrInUse: a server instance runs on the database (Migrate, Export).
var ErrInUse = errors.New("the database is in use")

// NotInUse fails with ErrInUse if server instances are live on the
// database: their heartbeat is within their lease and they have not left
// (cluster_instances, docs/ha.md). A copy under them would replace their
// rows as they write (Migrate) or read a state that moves (Export). The
// error names each (id, host, pid), says when its lease ends, and how to
// go on: an instance killed with kill -9 never leaves, and counts as live
// until then.
func (db *DB) NotInUse(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, db.timeout)
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT id, host, pid, extract(epoch FROM clock_timestamp() - heartbeat)::float8,
  heartbeat + lease_ms * interval '1 millisecond', extract(epoch FROM heartbeat + lease_ms * interval '1 millisecond' - clock_timestamp())::float8
FROM cluster_instances
WHERE NOT stopped AND heartbeat > clock_timestamp() - lease_ms * interval '1 millisecond'
ORDER BY id COLLATE "C"`)
	if err != nil {
		return fmt.Errorf("PostgreSQL state store %s: read the server instances: %w", db.target, pgError(err))
	}
	var live []string
	var last time.Time
	for rows.Next() {
		var id, host string
		var pid int
		var age, left float64
		var ends time.Time
		if err := rows.Scan(&id, &host, &pid, &age, &ends, &left); err != nil {
			return fmt.Errorf("PostgreSQL state store %s: read the server instances: %w", db.target, err)
		}
		live = append(live, fmt.Sprintf("instance %q on %s, pid %d: last heartbeat %s ago, lease ends at %s (in %s) unless it beats again",
			id, host, pid, roundSeconds(age), slot.FormatTime(ends.UTC()), roundSeconds(left)))
		if ends.After(last) {
			last = ends
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("PostgreSQL state store %s: read the server instances: %w", db.target, pgError(err))
	}
	if len(live) > 0 {
		return fmt.Errorf("%w: nothing copied: celos servers are live on %s:\n  %s\n"+
			"Stop them first (a server stopped normally leaves at once). One that was killed (kill -9) or crashed counts as live until its lease ends: run this again after %s, or start it again with the same --instance-id and stop it",
			ErrInUse, db.target, strings.Join(first(live, 5), "\n  "), slot.FormatTime(last.UTC()))
	}
	return nil
}

// roundSeconds formats seconds as a duration: 1.5s, 14s, 2m30s.
func roundSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
