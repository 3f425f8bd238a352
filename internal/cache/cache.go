// Package cache is celos's on-disk cache: results of `celos vet` and
// `celos export` keyed by the content of everything they read (Store),
// and the SHA-256 of a deploy's local files keyed by their identity
// (FileHashes). It lives in one directory, $CELOS_CACHE_DIR or else
// os.UserCacheDir()/celos. Everything in it is a hint: an entry that
// cannot be read, or whose checksum does not match its content, is a
// miss and is written again; every write is atomic (internal/atomicfile),
// so concurrent runs at worst do the same work twice.
package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/celos-go/celos/internal/atomicfile"
	"github.com/celos-go/celos/internal/regfile"
)

// EnvDir names the environment variable that overrides the cache
// directory; the value "off" turns the cache off.
const EnvDir = "CELOS_CACHE_DIR"

// ErrOff is returned by Dir when the cache is turned off.
var ErrOff = errors.New("the cache is turned off (" + EnvDir + "=off)")

// Dir returns the cache directory: $CELOS_CACHE_DIR, else
// os.UserCacheDir()/celos. It is not created.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		if d == "off" {
			return "", ErrOff
		}
		return filepath.Abs(d)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set %s): %w", EnvDir, err)
	}
	return filepath.Join(base, "celos"), nil
}

// magic starts every entry of a Store, followed by the SHA-256 of the
// rest (hex) and a newline.
const magic = "celos-cache-v1 "

// MaxEntrySize bounds an entry: Get reads no more (a larger file is a
// miss), and Put does not write a larger one.
const MaxEntrySize = 256 << 20

// Store keeps results by key in dir/<kind>/<key[:2]>/<key>.
type Store struct {
	dir string
}

// Open returns the store in dir (created when first written).
func Open(dir string) *Store { return &Store{dir: dir} }

func (s *Store) path(kind, key string) (string, error) {
	if len(key) < 8 || kind == "" || filepath.Base(kind) != kind || filepath.Base(key) != key {
		return "", fmt.Errorf("cache: bad key %q/%q", kind, key)
	}
	return filepath.Join(s.dir, kind, key[:2], key), nil
}

// Get returns the entry kind/key. ok is false when there is none, or
// when it is damaged (not this format, or its checksum does not match):
// a damaged entry is never returned. What celos does not write there (a
// named pipe, a device, a symbolic link, a file over MaxEntrySize) is a
// miss, found without waiting on it or reading it (internal/regfile).
func (s *Store) Get(kind, key string) (data []byte, ok bool) {
	p, err := s.path(kind, key)
	if err != nil {
		return nil, false
	}
	raw, err := regfile.ReadFileNoFollow(p, MaxEntrySize)
	if err != nil {
		return nil, false
	}
	rest, found := bytes.CutPrefix(raw, []byte(magic))
	if !found || len(rest) < 65 || rest[64] != '\n' {
		return nil, false
	}
	sum := sha256.Sum256(rest[65:])
	if hex.EncodeToString(sum[:]) != string(rest[:64]) {
		return nil, false
	}
	return rest[65:], true
}

// Put writes the entry kind/key atomically (replacing a damaged one).
func (s *Store) Put(kind, key string, data []byte) error {
	p, err := s.path(kind, key)
	if err != nil {
		return err
	}
	if len(magic)+65+len(data) > MaxEntrySize {
		return fmt.Errorf("cache: an entry of %d bytes is larger than %s", len(data), regfile.Size(MaxEntrySize))
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	sum := sha256.Sum256(data)
	buf := make([]byte, 0, len(magic)+65+len(data))
	buf = append(buf, magic...)
	buf = append(buf, hex.EncodeToString(sum[:])...)
	buf = append(buf, '\n')
	buf = append(buf, data...)
	if err := atomicfile.Write(p, buf, 0o600, false); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// Remove removes the entry kind/key, if any.
func (s *Store) Remove(kind, key string) error {
	p, err := s.path(kind, key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
