package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statedb"
)

// TestDBMigrateFromAReadOnlyDirectory: a state directory the user cannot
// write (a snapshot mounted read-only) is migrated: it was refused, since
// opening the file store creates and writes its lock file. The source is
// read without writing anything, and it says so; a server holding the
// directory's lock is still refused (its lock is checked with a shared
// flock through a read-only descriptor).
func TestDBMigrateFromAReadOnlyDirectory(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	celos := func(t *testing.T, want int, args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != want {
			t.Fatalf("celos %v: exit %d, want %d\n%s%s", args[:2], code, want, out.String(), errOut.String())
		}
		return out.String(), errOut.String()
	}

	t.Run("held by a server, then not", func(t *testing.T) {
		dsn := srv.CreateDB(t)
		src := writeSuccessState(t, 3, 5)
		held, err := statedb.Open(src) // as a server on it
		if err != nil {
			t.Fatal(err)
		}
		makeReadOnly(t, src)
		before := files(t, src)
		_, errOut := celos(t, ExitFailure, "db", "migrate", "--from", src, "--to", dsn)
		if !strings.Contains(errOut, "in use by process "+strconv.Itoa(os.Getpid())) {
			t.Errorf("migrate from a read-only directory a server holds: %s", errOut)
		}
		if n := countRows(t, dsn, "celos_slots"); n != 0 {
			t.Fatalf("migrate copied %d slot states from a directory a server holds", n)
		}
		held.Close()
		out, _ := celos(t, 0, "db", "migrate", "--from", src, "--to", dsn)
		if !strings.Contains(out, "not writable") || !strings.Contains(out, "read-only") || !strings.Contains(out, "3 workflows: 15 slot states") {
			t.Errorf("migrate from a read-only directory printed:\n%s", out)
		}
		if n := countRows(t, dsn, "celos_slots"); n != 15 {
			t.Fatalf("%d slot states copied, want 15", n)
		}
		if d := diffFiles(before, files(t, src)); d != "" {
			t.Errorf("the migrate changed the read-only source: %s", d)
		}
	})

	t.Run("no lock file", func(t *testing.T) {
		dsn := srv.CreateDB(t)
		src := writeSuccessState(t, 2, 3)
		if err := os.Remove(filepath.Join(src, ".lock")); err != nil {
			t.Fatal(err)
		}
		makeReadOnly(t, src)
		out, _ := celos(t, 0, "db", "migrate", "--from", src, "--to", dsn)
		if !strings.Contains(out, "no lock file") || !strings.Contains(out, "2 workflows: 6 slot states") {
			t.Errorf("migrate from a read-only directory without a lock file printed:\n%s", out)
		}
		if _, err := os.Lstat(filepath.Join(src, ".lock")); err == nil {
			t.Errorf("the migrate made a lock file in the read-only source")
		}
	})
}

// diffFiles names the first path whose content differs, "" if none.
func diffFiles(a, b map[string]string) string {
	for p, v := range a {
		if w, ok := b[p]; !ok || w != v {
			return p
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			return p
		}
	}
	return ""
}

// makeReadOnly makes dir really read-only for this process: for a user,
// every file and directory in it loses its write bits; for root, whom
// permissions do not stop, dir is bind-mounted read-only on itself. It
// checks that neither a new file nor a write to the lock file succeeds,
// and undoes it at the end of the test.
func makeReadOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind-mount %s: %v", dir, err)
		}
		t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
		if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount %s read-only: %v", dir, err)
		}
	} else {
		var dirs []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil {
				if fi, err := d.Info(); err == nil {
					os.Chmod(p, fi.Mode().Perm()&^0o222)
				}
				if d.IsDir() {
					dirs = append(dirs, p)
				}
			}
			return nil
		})
		t.Cleanup(func() {
			for _, d := range dirs {
				os.Chmod(d, 0o755)
			}
		})
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); err == nil {
		t.Fatalf("%s is still writable", dir)
	}
	if f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR, 0); err == nil {
		f.Close()
		t.Fatalf("%s/.lock is still writable", dir)
	}
}
