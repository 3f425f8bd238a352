package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statedb"
)

// TestDBExportIntoAnExistingDirectory: an export into an existing empty
// --to is written aside and renamed over it; a lock file no process holds
// (left by a server that never wrote a record) goes with it, one a
// server holds is refused, and so is a mount point (nothing can be
// renamed over it) and a symbolic link to an empty directory (the rename
// would replace the link) — all without writing anything.
func TestDBExportIntoAnExistingDirectory(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	src := writeSuccessState(t, 3, 2)
	celos := func(t *testing.T, want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != want {
			t.Fatalf("celos %v: exit %d, want %d\n%s%s", args[:2], code, want, out.String(), errOut.String())
		}
		return errOut.String()
	}
	celos(t, 0, "db", "migrate", "--from", src, "--to", dsn)
	want := files(t, src)

	t.Run("stale lock", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "back")
		if err := os.Mkdir(dst, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, ".lock"), []byte("12345\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		celos(t, 0, "db", "export", "--from", dsn, "--to", dst)
		if d := cmp.Diff(want, files(t, dst)); d != "" {
			t.Fatalf("export differs (-source +export):\n%s", d)
		}
		if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want mode 0700 as before", dst, fi.Mode(), err)
		}
	})

	t.Run("held lock", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "back")
		held, err := statedb.Open(dst)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		errOut := celos(t, ExitFailure, "db", "export", "--from", dsn, "--to", dst)
		if !strings.Contains(errOut, "in use") || !strings.Contains(errOut, "nothing written") {
			t.Errorf("export into a directory a process holds: %s", errOut)
		}
		if _, err := os.Lstat(dst + ".export-incomplete"); err == nil {
			t.Errorf("the refused export wrote %s.export-incomplete", dst)
		}
	})

	t.Run("current directory", func(t *testing.T) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "back")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dst)
		celos(t, 0, "db", "export", "--from", dsn, "--to", ".")
		if d := cmp.Diff(want, files(t, dst)); d != "" {
			t.Fatalf("export --to . differs (-source +export):\n%s", d)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 1 {
			t.Errorf("export --to . left beside it: %v", ents)
		}
	})

	t.Run("symbolic link", func(t *testing.T) {
		target := t.TempDir()
		dst := filepath.Join(t.TempDir(), "back")
		if err := os.Symlink(target, dst); err != nil {
			t.Fatal(err)
		}
		errOut := celos(t, ExitFailure, "db", "export", "--from", dsn, "--to", dst)
		if !strings.Contains(errOut, "is a symbolic link") || !strings.Contains(errOut, "nothing written") {
			t.Errorf("export into a symbolic link to an empty directory: %s", errOut)
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			t.Errorf("the refused export wrote into %s: %v", target, ents)
		}
		if _, err := os.Lstat(dst + ".export-incomplete"); err == nil {
			t.Errorf("the refused export wrote %s.export-incomplete", dst)
		}
	})

	t.Run("mount point", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("mounting a tmpfs needs root; the refusal of a mount point is the same code as root's")
		}
		dst := filepath.Join(t.TempDir(), "back")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", dst, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount a tmpfs on %s: %v", dst, err)
		}
		t.Cleanup(func() { syscall.Unmount(dst, 0) })
		errOut := celos(t, ExitFailure, "db", "export", "--from", dsn, "--to", dst)
		if !strings.Contains(errOut, "is a mount point") || !strings.Contains(errOut, filepath.Join(dst, "db")) {
			t.Errorf("export into a mount point: %s", errOut)
		}
		if ents, _ := os.ReadDir(dst); len(ents) != 0 {
			t.Errorf("the refused export wrote into %s: %v", dst, ents)
		}
		if _, err := os.Lstat(dst + ".export-incomplete"); err == nil {
			t.Errorf("the refused export wrote %s.export-incomplete", dst)
		}
		celos(t, 0, "db", "export", "--from", dsn, "--to", filepath.Join(dst, "db"))
	})
}
