package statepg

// Registers: rows of celos_registers, read and written directly (the
// API's register calls are not on a step's path).

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/store"
)

// validName checks a bucket or key by the rules every store applies
// (store.CheckName).
func validName(kind, s string) error { return store.CheckName(kind, s) }

func validRegister(bucket, key string) error {
	if err := validName("bucket", bucket); err != nil {
		return err
	}
	return validName("key", key)
}

// GetRegister returns the JSON stored under bucket/key (ErrNotFound if none).
func (db *DB) GetRegister(bucket, key string) (json.RawMessage, error) {
	if err := validRegister(bucket, key); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx()
	defer cancel()
	var v string
	err := db.pool.QueryRow(ctx, "SELECT value::text FROM celos_registers WHERE bucket = $1 AND key = $2", bucket, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: register %s/%s", store.ErrNotFound, bucket, key)
	}
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: register %s/%s: %w", bucket, key, pgError(err))
	}
	db.reads.Add(1)
	return json.RawMessage(v), nil
}

// PutRegister stores value (which must be valid JSON in UTF-8) under
// bucket/key, byte for byte.
func (db *DB) PutRegister(bucket, key string, value json.RawMessage) error {
	if err := validRegister(bucket, key); err != nil {
		return err
	}
	if err := checkRegisterValue(value); err != nil {
		return err
	}
	ctx, cancel := db.ctx()
	defer cancel()
	_, err := db.pool.Exec(ctx, `INSERT INTO celos_registers (bucket, key, value) VALUES ($1, $2, $3::text::json)
ON CONFLICT (bucket, key) DO UPDATE SET value = excluded.value`, bucket, key, string(value))
	if err != nil {
		return fmt.Errorf("PostgreSQL state store: put register %s/%s: %w", bucket, key, pgError(err))
	}
	db.writes.Add(1)
	return nil
}

// DeleteRegister removes bucket/key (a missing one is not an error).
func (db *DB) DeleteRegister(bucket, key string) error {
	if err := validRegister(bucket, key); err != nil {
		return err
	}
	ctx, cancel := db.ctx()
	defer cancel()
	tag, err := db.pool.Exec(ctx, "DELETE FROM celos_registers WHERE bucket = $1 AND key = $2", bucket, key)
	if err != nil {
		return fmt.Errorf("PostgreSQL state store: delete register %s/%s: %w", bucket, key, pgError(err))
	}
	db.writes.Add(tag.RowsAffected())
	return nil
}

// checkRegisterValue checks a value as PutRegister stores it
// (store.CheckValue). The column is json, not jsonb: it keeps the text
// byte for byte and holds escapes such as \u0000, which jsonb refuses; a
// NUL byte itself is not JSON.
func checkRegisterValue(value json.RawMessage) error { return store.CheckValue(value) }

// PutRegisters stores the values of kv under their keys in bucket, byte
// for byte, in one statement (one round trip, one transaction): the keys
// it does not report are all durable when it returns, or none is. It
// returns the keys that could not be written, with the reason (a bad
// name or value: that key alone, the others are written; a failed
// statement: every key).
func (db *DB) PutRegisters(bucket string, kv map[string]json.RawMessage) map[string]error {
	failed := make(map[string]error)
	keys := make([]string, 0, len(kv))
	values := make([]string, 0, len(kv))
	for k, v := range kv {
		if err := validRegister(bucket, k); err != nil {
			failed[k] = err
			continue
		}
		if err := checkRegisterValue(v); err != nil {
			failed[k] = err
			continue
		}
		keys = append(keys, k)
		values = append(values, string(v))
	}
	if len(keys) > 0 {
		ctx, cancel := db.ctx()
		defer cancel()
		_, err := db.pool.Exec(ctx, `INSERT INTO celos_registers (bucket, key, value)
SELECT $1, k, v::json FROM unnest($2::text[], $3::text[]) AS t(k, v)
ON CONFLICT (bucket, key) DO UPDATE SET value = excluded.value`, bucket, keys, values)
		if err != nil {
			err = pgError(err)
			for _, k := range keys {
				failed[k] = fmt.Errorf("PostgreSQL state store: put register %s/%s (one of %d): %w", bucket, k, len(keys), err)
			}
		} else {
			db.writes.Add(int64(len(keys)))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// DeleteRegisters removes the keys of bucket (a missing one is not an
// error) in one statement. It returns the keys that could not be removed,
// with the reason (a failed statement: every key, none removed).
func (db *DB) DeleteRegisters(bucket string, keys []string) map[string]error {
	failed := make(map[string]error)
	valid := make([]string, 0, len(keys))
	for _, k := range keys {
		if err := validRegister(bucket, k); err != nil {
			failed[k] = err
			continue
		}
		valid = append(valid, k)
	}
	if len(valid) > 0 {
		ctx, cancel := db.ctx()
		defer cancel()
		tag, err := db.pool.Exec(ctx, "DELETE FROM celos_registers WHERE bucket = $1 AND key = ANY($2::text[])", bucket, valid)
		if err != nil {
			err = pgError(err)
			for _, k := range valid {
				failed[k] = fmt.Errorf("PostgreSQL state store: delete register %s/%s (one of %d): %w", bucket, k, len(valid), err)
			}
		} else {
			db.writes.Add(tag.RowsAffected())
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

func checkPrefix(bucket, prefix string) error {
	if err := validName("bucket", bucket); err != nil {
		return err
	}
	return store.CheckPrefix(prefix)
}

// DeleteRegistersWithPrefix removes every key of bucket starting with
// prefix, in one statement.
func (db *DB) DeleteRegistersWithPrefix(bucket, prefix string) error {
	if err := checkPrefix(bucket, prefix); err != nil {
		return err
	}
	ctx, cancel := db.ctx()
	defer cancel()
	tag, err := db.pool.Exec(ctx, "DELETE FROM celos_registers WHERE bucket = $1 AND starts_with(key, $2)", bucket, prefix)
	if err != nil {
		return fmt.Errorf("PostgreSQL state store: delete registers %s/%s*: %w", bucket, prefix, pgError(err))
	}
	db.writes.Add(tag.RowsAffected())
	return nil
}

// RegisterKeys lists the keys of bucket starting with prefix, sorted by
// byte (as the file store lists them). An unknown bucket has no keys.
func (db *DB) RegisterKeys(bucket, prefix string) ([]string, error) {
	if err := checkPrefix(bucket, prefix); err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx()
	defer cancel()
	rows, err := db.pool.Query(ctx, `SELECT key FROM celos_registers WHERE bucket = $1 AND starts_with(key, $2) ORDER BY key COLLATE "C"`, bucket, prefix)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: list registers %s/%s*: %w", bucket, prefix, pgError(err))
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL state store: list registers %s/%s*: %w", bucket, prefix, pgError(err))
	}
	if keys == nil {
		keys = []string{}
	}
	db.reads.Add(int64(len(keys)))
	return keys, nil
}

// HasRegister reports whether bucket holds key, as RegisterKeys would
// list it, with one indexed query instead of a listing: an event
// trigger's cost does not grow with its bucket. A key that is not a valid
// name is in no bucket (as in the file store); an unknown bucket holds
// nothing.
func (db *DB) HasRegister(bucket, key string) (bool, error) {
	if err := validName("bucket", bucket); err != nil {
		return false, err
	}
	if validName("key", key) != nil {
		return false, nil
	}
	ctx, cancel := db.ctx()
	defer cancel()
	var found bool
	err := db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM celos_registers WHERE bucket = $1 AND key = $2)", bucket, key).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("PostgreSQL state store: look up register %s/%s: %w", bucket, key, pgError(err))
	}
	if found {
		db.reads.Add(1)
	}
	return found, nil
}
