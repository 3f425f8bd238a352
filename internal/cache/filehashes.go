package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// FileHashes remembers the SHA-256 of the local files under one root by
// their identity: device, inode, size, modification and change time in
// nanoseconds. A file rewritten keeps none of them all (the kernel sets
// the change time, which no user can set back), so a recorded checksum
// is the file's while its identity is unchanged. A file changed within
// racyAge of its hashing is not recorded: the file system's clock ticks
// in milliseconds, so a second write in the same tick, with the same
// size, would keep the identity.
type FileHashes struct {
	store *Store
	root  string // absolute
	key   string
	now   func() time.Time

	mu      sync.Mutex
	old     map[string]FileEntry
	seen    map[string]FileEntry
	changed bool
}

// FileEntry is one file's identity and checksum.
type FileEntry struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Size   int64  `json:"size"`
	MTime  int64  `json:"mtime"`
	CTime  int64  `json:"ctime"`
	SHA256 string `json:"sha256"`
}

const racyAge = 2 * time.Second

const fileHashesFormat = "celos.dev/cache/file-hashes/v1"

type fileHashesDoc struct {
	Format string               `json:"format"`
	Root   string               `json:"root"`
	Files  map[string]FileEntry `json:"files"`
}

// OpenFileHashes returns the checksums recorded for the files under root
// (none when the entry is missing or damaged).
func OpenFileHashes(s *Store, root string) *FileHashes {
	abs, err := filepath.Abs(root)
	if err != nil {
		abs = root
	}
	sum := sha256.Sum256([]byte(abs))
	h := &FileHashes{store: s, root: abs, key: hex.EncodeToString(sum[:]), now: time.Now, old: map[string]FileEntry{}, seen: map[string]FileEntry{}}
	if data, ok := s.Get("filehashes", h.key); ok {
		var doc fileHashesDoc
		if json.Unmarshal(data, &doc) == nil && doc.Format == fileHashesFormat && doc.Root == abs && doc.Files != nil {
			h.old = doc.Files
		}
	}
	return h
}

func identity(st *syscall.Stat_t) FileEntry {
	return FileEntry{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano()}
}

// Lookup returns the recorded checksum of the file name (relative to the
// root) whose fstat is st, if its identity is unchanged.
func (h *FileHashes) Lookup(name string, st *syscall.Stat_t) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.old[name]
	want := identity(st)
	want.SHA256 = e.SHA256
	if !ok || e != want || len(e.SHA256) != 64 {
		return "", false
	}
	h.seen[name] = e
	return e.SHA256, true
}

// Add records the checksum of name, hashed while its fstat was st,
// unless it changed too recently to be told apart from a later write.
func (h *FileHashes) Add(name string, st *syscall.Stat_t, sum string) {
	e := identity(st)
	e.SHA256 = sum
	limit := h.now().Add(-racyAge).UnixNano()
	if e.MTime > limit || e.CTime > limit {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[name] = e
	h.changed = true
}

// Prune forgets the recorded checksums of the files keep refuses (files
// no longer in the tree), so that the entry does not grow with every file
// a project ever had; Save then writes what is left.
func (h *FileHashes) Prune(keep func(name string) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.old {
		if !keep(name) {
			delete(h.old, name)
			h.changed = true
		}
	}
	for name := range h.seen {
		if !keep(name) {
			delete(h.seen, name)
			h.changed = true
		}
	}
}

// Save writes the checksums recorded with Add since OpenFileHashes,
// beside the ones that were there, if Add recorded any or Prune forgot
// any.
func (h *FileHashes) Save() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.changed {
		return nil
	}
	files := make(map[string]FileEntry, len(h.old)+len(h.seen))
	for name, e := range h.old {
		files[name] = e
	}
	for name, e := range h.seen {
		files[name] = e
	}
	data, err := json.Marshal(fileHashesDoc{Format: fileHashesFormat, Root: h.root, Files: files})
	if err != nil {
		return err
	}
	return h.store.Put("filehashes", h.key, data)
}
