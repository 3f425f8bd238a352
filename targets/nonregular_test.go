package targets

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SSH identity and known_hosts files that are named pipes or links to a
// device are refused (or, for the default identities, skipped) at once:
// opening a FIFO blocked the deploy forever, /dev/zero was read without end.
func TestSSHFilesThatAreNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	within := func(name string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still running after 10s", name)
			return nil
		}
	}
	for _, p := range []string{fifo, zero} {
		err := within("authMethods "+p, func() error {
			_, _, cleanup, err := SSHOptions{Identities: []string{p}}.authMethods()
			if cleanup != nil {
				cleanup()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("identity %s: err = %v, want not a regular file", filepath.Base(p), err)
		}
		err = within("known_hosts "+p, func() error {
			files, err := SSHOptions{KnownHosts: []string{p}}.knownHostsFiles()
			if err != nil {
				return err
			}
			_, err = newHostKeys(files)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("known_hosts %s: err = %v, want not a regular file", filepath.Base(p), err)
		}
	}
	// A default identity (~/.ssh/id_*) that is a FIFO is skipped, not read.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(home, ".ssh", "id_ed25519"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")
	_ = within("default identities", func() error {
		_, _, cleanup, err := SSHOptions{}.authMethods()
		if cleanup != nil {
			cleanup()
		}
		return err
	})
}
