package cache

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestStoreGetPut(t *testing.T) {
	s := Open(t.TempDir())
	if _, ok := s.Get("vet", key); ok {
		t.Fatal("hit in an empty store")
	}
	if err := s.Put("vet", key, []byte("result")); err != nil {
		t.Fatal(err)
	}
	got, ok := s.Get("vet", key)
	if !ok || string(got) != "result" {
		t.Fatalf("Get = %q, %v", got, ok)
	}
	if _, ok := s.Get("export", key); ok {
		t.Fatal("kinds share entries")
	}
	for _, bad := range [][2]string{{"vet", "../../etc"}, {"../x", key}, {"vet", "short"}, {"", key}} {
		if err := s.Put(bad[0], bad[1], nil); err == nil {
			t.Errorf("Put(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// TestStoreDamagedEntry: an entry changed on disk (truncated, a byte
// flipped, another format) is a miss, never returned, and Put replaces it.
func TestStoreDamagedEntry(t *testing.T) {
	dir := t.TempDir()
	s := Open(dir)
	p := filepath.Join(dir, "export", key[:2], key)
	for name, damage := range map[string]func(b []byte) []byte{
		"truncated":    func(b []byte) []byte { return b[:len(b)-3] },
		"byte flipped": func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"other format": func(b []byte) []byte { return []byte("{\"json\": true}") },
		"empty":        func(b []byte) []byte { return nil },
		"header only":  func(b []byte) []byte { return b[:len(magic)+10] },
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Put("export", key, []byte(`{"workflows": []}`)); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, damage(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, ok := s.Get("export", key); ok {
				t.Fatalf("damaged entry returned: %q", got)
			}
			if err := s.Put("export", key, []byte("fresh")); err != nil {
				t.Fatal(err)
			}
			if got, ok := s.Get("export", key); !ok || string(got) != "fresh" {
				t.Fatalf("after Put: %q %v", got, ok)
			}
		})
	}
}

// TestStoreEntriesThatAreNotFiles: an entry that is a named pipe, a
// symbolic link (to /dev/zero, or to a good entry elsewhere), a directory
// or a file larger than MaxEntrySize is a miss, at once, and Put replaces
// it (but a directory). Before, a FIFO made celos vet and export wait for
// ever and a link to /dev/zero was read until memory ran out.
func TestStoreEntriesThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	s := Open(dir)
	p := filepath.Join(dir, "compile", key[:2], key)
	good := filepath.Join(t.TempDir(), "good")
	if err := Open(filepath.Dir(good)).Put("compile", key, []byte("elsewhere")); err != nil {
		t.Fatal(err)
	}
	goodEntry := filepath.Join(filepath.Dir(good), "compile", key[:2], key)
	for name, plant := range map[string]func() error{
		"fifo":             func() error { return syscall.Mkfifo(p, 0o600) },
		"link to a device": func() error { return os.Symlink("/dev/zero", p) },
		"link to an entry": func() error { return os.Symlink(goodEntry, p) },
		"directory":        func() error { return os.Mkdir(p, 0o700) },
		"too large": func() error {
			if err := os.WriteFile(p, []byte(magic), 0o600); err != nil {
				return err
			}
			return os.Truncate(p, MaxEntrySize+1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.RemoveAll(filepath.Dir(p)); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := plant(); err != nil {
				t.Fatal(err)
			}
			done := make(chan bool, 1)
			go func() {
				_, ok := s.Get("compile", key)
				done <- ok
			}()
			select {
			case ok := <-done:
				if ok {
					t.Fatal("a hit")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Get did not return within 30s")
			}
			if name == "directory" {
				return
			}
			if err := s.Put("compile", key, []byte("fresh")); err != nil {
				t.Fatal(err)
			}
			if got, ok := s.Get("compile", key); !ok || string(got) != "fresh" {
				t.Fatalf("after Put: %q %v", got, ok)
			}
		})
	}
}

// TestStoreConcurrent: writers and readers of one key at once never see
// a partial entry.
func TestStoreConcurrent(t *testing.T) {
	s := Open(t.TempDir())
	big := make([]byte, 1<<20)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if err := s.Put("export", key, big); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if got, ok := s.Get("export", key); ok && len(got) != len(big) {
					t.Errorf("partial entry: %d bytes", len(got))
				}
			}
		}()
	}
	wg.Wait()
}

func TestDir(t *testing.T) {
	t.Setenv(EnvDir, "/x/y")
	if d, err := Dir(); err != nil || d != "/x/y" {
		t.Fatalf("Dir = %q, %v", d, err)
	}
	t.Setenv(EnvDir, "off")
	if _, err := Dir(); err != ErrOff {
		t.Fatalf("off: %v", err)
	}
	t.Setenv(EnvDir, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if d, err := Dir(); err != nil || d != "/cache/celos" {
		t.Fatalf("default: %q, %v", d, err)
	}
}

func fstat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// TestFileHashes: a recorded checksum is returned while the file's
// identity is unchanged: not after a rewrite, even one that restores the
// size and the modification time; not for a file changed too recently.
func TestFileHashes(t *testing.T) {
	root := t.TempDir()
	cacheDir := t.TempDir()
	p := filepath.Join(root, "a.jar")
	if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := OpenFileHashes(Open(cacheDir), root)
	h.Add("a.jar", fstat(t, p), key)
	if _, ok := h.Lookup("a.jar", fstat(t, p)); ok {
		t.Fatal("a file changed just now was recorded (racy)")
	}
	h.now = func() time.Time { return time.Now().Add(time.Minute) }
	h.Add("a.jar", fstat(t, p), key)
	if err := h.Save(); err != nil {
		t.Fatal(err)
	}

	h = OpenFileHashes(Open(cacheDir), root)
	if sum, ok := h.Lookup("a.jar", fstat(t, p)); !ok || sum != key {
		t.Fatalf("Lookup after Save: %q %v", sum, ok)
	}
	if _, ok := h.Lookup("b.jar", fstat(t, p)); ok {
		t.Fatal("hit for another name")
	}
	if _, ok := OpenFileHashes(Open(cacheDir), t.TempDir()).Lookup("a.jar", fstat(t, p)); ok {
		t.Fatal("hit for another root")
	}
	// A run that looked nothing up keeps what was recorded.
	if err := OpenFileHashes(Open(cacheDir), root).Save(); err != nil {
		t.Fatal(err)
	}
	other := OpenFileHashes(Open(cacheDir), root)
	other.now = h.now
	q := filepath.Join(root, "b.jar")
	if err := os.WriteFile(q, []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	other.Add("b.jar", fstat(t, q), key)
	if err := other.Save(); err != nil {
		t.Fatal(err)
	}
	h = OpenFileHashes(Open(cacheDir), root)
	if _, ok := h.Lookup("a.jar", fstat(t, p)); !ok {
		t.Fatal("a.jar forgotten by a run that recorded only b.jar")
	}
	before := fstat(t, p)
	if err := os.WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(before.Mtim.Sec, before.Mtim.Nsec)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Lookup("a.jar", fstat(t, p)); ok {
		t.Fatal("hit after a rewrite with the same size and modification time")
	}
}

// TestFileHashesDamaged: a damaged or foreign record is no record.
func TestFileHashesDamaged(t *testing.T) {
	root, cacheDir := t.TempDir(), t.TempDir()
	p := filepath.Join(root, "a.jar")
	if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := OpenFileHashes(Open(cacheDir), root)
	h.now = func() time.Time { return time.Now().Add(time.Minute) }
	h.Add("a.jar", fstat(t, p), key)
	if err := h.Save(); err != nil {
		t.Fatal(err)
	}
	// A valid entry (checksum right) of another format is ignored too.
	if err := Open(cacheDir).Put("filehashes", h.key, []byte(`{"format": "other", "files": {"a.jar": {"sha256": "x"}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := OpenFileHashes(Open(cacheDir), root).Lookup("a.jar", fstat(t, p)); ok {
		t.Fatal("a record of another format was used")
	}
	if d := cmp.Diff(map[string]FileEntry{}, OpenFileHashes(Open(cacheDir), root).old); d != "" {
		t.Fatal(d)
	}
}

// TestFileHashesPrune: Prune forgets the files keep refuses, and Save
// then writes the entry without them (it did not shrink before: every
// file a project ever had stayed recorded).
func TestFileHashesPrune(t *testing.T) {
	root, cacheDir := t.TempDir(), t.TempDir()
	later := func() time.Time { return time.Now().Add(time.Minute) }
	h := OpenFileHashes(Open(cacheDir), root)
	h.now = later
	for _, name := range []string{"a.jar", "b.jar", "c.jar"} {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		h.Add(name, fstat(t, p), key)
	}
	if err := h.Save(); err != nil {
		t.Fatal(err)
	}
	h = OpenFileHashes(Open(cacheDir), root)
	if _, ok := h.Lookup("b.jar", fstat(t, filepath.Join(root, "b.jar"))); !ok {
		t.Fatal("b.jar not recorded")
	}
	h.Prune(func(name string) bool { return name != "a.jar" && name != "b.jar" })
	if err := h.Save(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range OpenFileHashes(Open(cacheDir), root).old {
		names = append(names, name)
	}
	if d := cmp.Diff([]string{"c.jar"}, names); d != "" {
		t.Fatalf("recorded after Prune (-want +got):\n%s", d)
	}
}
