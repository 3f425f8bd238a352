package statedb

// Registers: register/<bucket>/<key>, any JSON.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/celos-go/celos/scheduler/store"
	"golang.org/x/sys/unix"
)

func (db *DB) registerPath(bucket, key string) (string, error) {
	if err := validName("bucket", bucket); err != nil {
		return "", err
	}
	if err := validName("key", key); err != nil {
		return "", err
	}
	return filepath.Join(db.dir, "register", bucket, key), nil
}

// GetRegister returns the JSON stored under bucket/key (ErrNotFound if none).
func (db *DB) GetRegister(bucket, key string) (json.RawMessage, error) {
	p, err := db.registerPath(bucket, key)
	if err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, errClosed
	}
	data, err := db.readFileMax(filepath.Join("register", bucket, key), store.MaxRegisterBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: register %s/%s", store.ErrNotFound, bucket, key)
	}
	if err != nil {
		return nil, fmt.Errorf("state database: register %s: %w", p, err)
	}
	db.reads.Add(1)
	if !json.Valid(data) { // written by hand: PutRegister stores only JSON
		return nil, fmt.Errorf("state database: register %s: %w: not JSON (%d bytes)", p, store.ErrCorrupt, len(data))
	}
	return json.RawMessage(data), nil
}

// PutRegister stores value (which must be valid JSON) under bucket/key.
func (db *DB) PutRegister(bucket, key string, value json.RawMessage) error {
	if _, err := db.registerPath(bucket, key); err != nil {
		return err
	}
	if err := store.CheckValue(value); err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	return db.writeFileAtomic(filepath.Join("register", bucket), key, value)
}

// DeleteRegister removes bucket/key (a missing one is not an error).
func (db *DB) DeleteRegister(bucket, key string) error {
	if _, err := db.registerPath(bucket, key); err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	return db.removeFile(filepath.Join("register", bucket), key)
}

// DeleteRegistersWithPrefix removes every key of bucket starting with prefix.
func (db *DB) DeleteRegistersWithPrefix(bucket, prefix string) error {
	keys, err := db.RegisterKeys(bucket, prefix)
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	dir := filepath.Join("register", bucket)
	for _, k := range keys {
		if err := db.removeFile(dir, k); err != nil {
			return err
		}
	}
	return nil
}

// RegisterKeys lists the keys of bucket starting with prefix, sorted. An
// unknown bucket has no keys.
func (db *DB) RegisterKeys(bucket, prefix string) ([]string, error) {
	if err := validName("bucket", bucket); err != nil {
		return nil, err
	}
	if err := store.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	if db.isClosed() {
		return nil, errClosed
	}
	entries, err := db.readDir(filepath.Join("register", bucket))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	out := []string{}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && validName("key", n) == nil && strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, nil
}

// isClosed reports whether Close was called (reads that take no lock
// check it: a closed store answers nothing, its directory may be
// another process's by now).
func (db *DB) isClosed() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.closed
}

// HasRegister reports whether bucket holds key exactly as RegisterKeys
// would list it (an entry that is not a directory, under a valid name),
// with one stat instead of a listing: an event trigger's cost does not
// grow with its bucket. A key that is not a valid name is in no bucket;
// an unknown bucket holds nothing.
func (db *DB) HasRegister(bucket, key string) (bool, error) {
	if err := validName("bucket", bucket); err != nil {
		return false, err
	}
	if validName("key", key) != nil {
		return false, nil
	}
	if db.isClosed() {
		return false, errClosed
	}
	d, err := db.openDir(filepath.Join("register", bucket))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("state database: %w", err)
	}
	defer d.Close()
	var st unix.Stat_t
	for {
		err = unix.Fstatat(int(d.Fd()), key, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == unix.ENOENT:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("state database: %w", &fs.PathError{Op: "stat", Path: filepath.Join(db.dir, "register", bucket, key), Err: err})
	}
	return st.Mode&unix.S_IFMT != unix.S_IFDIR, nil
}

// PutRegisters stores the JSON values of kv under their keys in bucket,
// all together (writeMany): every value to a temporary file in the
// bucket's directory, one syncfs makes their contents (and the directory,
// if new) durable, they are renamed into place, and a second syncfs makes
// the renames durable — two file-system syncs in all instead of a file
// fsync and a directory fsync per key. When it returns, every key it does
// not report is durable. A crash at any point leaves each key whole, old
// or new (a rename replaces a file at once; the temporary files of an
// unfinished batch are hidden dot files), never torn. It returns the keys
// that could not be written, with the reason (a bad name or value: that
// key alone; a failed sync: every key written).
func (db *DB) PutRegisters(bucket string, kv map[string]json.RawMessage) map[string]error {
	failed := make(map[string]error)
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	keys := make([]string, 0, len(kv))
	ws := make([]fileWrite, 0, len(kv))
	dir := filepath.Join("register", bucket)
	for k, v := range kv {
		switch {
		case closed:
			failed[k] = errClosed
		case store.CheckValue(v) != nil:
			failed[k] = store.CheckValue(v)
		default:
			if _, err := db.registerPath(bucket, k); err != nil {
				failed[k] = err
				continue
			}
			keys = append(keys, k)
			ws = append(ws, fileWrite{dir: dir, name: k, data: v})
		}
	}
	if len(ws) > 0 {
		syncErr := db.writeMany(ws)
		for i, k := range keys {
			switch {
			case ws[i].err != nil:
				failed[k] = fmt.Errorf("put register %s/%s: %w", bucket, k, ws[i].err)
			case syncErr != nil:
				failed[k] = fmt.Errorf("put register %s/%s: %w", bucket, k, syncErr)
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// DeleteRegisters removes the keys of bucket (a missing one is not an
// error) with one fsync of the bucket's directory in all. It returns the
// keys that could not be removed, with the reason (a failed sync: every
// key removed, which may come back after a crash).
func (db *DB) DeleteRegisters(bucket string, keys []string) map[string]error {
	failed := make(map[string]error)
	db.mu.Lock()
	defer db.mu.Unlock()
	dir := filepath.Join("register", bucket)
	s := db.dirSet()
	defer s.close()
	var removed []string
	for _, k := range keys {
		if db.closed {
			failed[k] = errClosed
			continue
		}
		if _, err := db.registerPath(bucket, k); err != nil {
			failed[k] = err
			continue
		}
		if err := db.removeIn(s, dir, k, false); err != nil {
			failed[k] = err
			continue
		}
		removed = append(removed, k)
	}
	if len(removed) > 0 {
		err := db.syncBucket(s, dir)
		for _, k := range removed {
			if err != nil {
				failed[k] = fmt.Errorf("remove register %s/%s: %w", bucket, k, err)
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// syncBucket fsyncs the register directory dir after removals in it
// through s (nothing if it does not exist: nothing was removed).
func (db *DB) syncBucket(s *dirSet, dir string) error {
	fd, err := s.open(dir, mkNone)
	if isNotExist(err) {
		return nil
	}
	if err == nil {
		err = db.syncDirFD(fd)
	}
	if err != nil {
		return fmt.Errorf("state database: sync %s: %w", filepath.Join(db.dir, dir), err)
	}
	return nil
}
