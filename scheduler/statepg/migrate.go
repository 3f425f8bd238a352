package statepg

// The schema: versioned SQL files embedded from migrations/, applied in
// order by a small runner under an advisory lock (docs/postgres.md says why
// not a library).

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrSchemaNewer: the database was migrated by a newer celos.
var ErrSchemaNewer = errors.New("the database's schema is newer than this celos")

// ErrPermission: the role may not do what opening the store needs
// (create the schema's tables, read or write them).
var ErrPermission = errors.New("permission denied")

// migrationLock is the key of the advisory lock held while migrating
// ("celos" in ASCII), so that instances starting together migrate once.
const migrationLock = 0x63656c6f73

// migration is one embedded SQL file, NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
	sum     string // sha256 of sql, hex
}

// migrations returns the embedded migrations, by version.
func migrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range ents {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || len(num) != 4 {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", e.Name())
		}
		data, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		out = append(out, migration{version: v, name: name, sql: string(data), sum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("two migrations numbered %04d", out[i].version)
		}
	}
	return out, nil
}

// SchemaVersion is the newest migration this celos knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate brings the schema up to date: every embedded migration not yet
// recorded in celos_schema_version is applied, each in its own
// transaction with its row, in order, under an advisory lock. A database
// with a version this celos does not know is refused (ErrSchemaNewer), and
// so is one whose recorded migration differs from the embedded file.
func migrate(ctx context.Context, pool *pgxpool.Pool) (applied int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, fmt.Errorf("embedded migrations: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return 0, fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must go even when ctx is done (else
		// the connection is closed, which releases it too).
		if _, uerr := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", int64(migrationLock)); uerr != nil {
			conn.Conn().Close(context.Background())
		}
	}()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('celos_schema_version') IS NOT NULL").Scan(&exists); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE TABLE celos_schema_version (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	sha256     text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return 0, fmt.Errorf("create the schema version table: %w", pgError(err))
		}
	}
	done, err := appliedVersions(ctx, conn.Conn())
	if err != nil {
		return 0, err
	}
	known := make(map[int]migration, len(ms))
	for _, m := range ms {
		known[m.version] = m
	}
	for v, sum := range done {
		m, ok := known[v]
		if !ok {
			return 0, fmt.Errorf("%w: it has migration %04d, this celos knows up to %04d; upgrade celos (or use a database of this version)", ErrSchemaNewer, v, SchemaVersion())
		}
		if sum != m.sum {
			return 0, fmt.Errorf("migration %04d_%s applied to the database differs from this celos's (sha256 %s, here %s): the databases of two builds were mixed", v, m.name, short(sum), short(m.sum))
		}
	}
	for _, m := range ms {
		if _, ok := done[m.version]; ok {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO celos_schema_version (version, name, sha256) VALUES ($1, $2, $3)", m.version, m.name, m.sum)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("apply migration %04d_%s: %w", m.version, m.name, pgError(err))
		}
		applied++
	}
	return applied, nil
}

func appliedVersions(ctx context.Context, conn *pgx.Conn) (map[int]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, sha256 FROM celos_schema_version")
	if err != nil {
		return nil, fmt.Errorf("read the schema version: %w", pgError(err))
	}
	done := make(map[int]string)
	for rows.Next() {
		var v int
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			return nil, fmt.Errorf("read the schema version: %w", err)
		}
		done[v] = sum
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the schema version: %w", pgError(err))
	}
	return done, nil
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
