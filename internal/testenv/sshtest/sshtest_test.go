package sshtest_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/celos-go/celos/internal/testenv/sshtest"
)

func put(t *testing.T, cl *sftp.Client, name, data string) {
	t.Helper()
	f, err := cl.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, cl *sftp.Client, name string) string {
	t.Helper()
	f, err := cl.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOpenSSH proves the server is the real OpenSSH with internal-sftp:
// upload, atomic PosixRename over an existing file, delete, and the files
// land on the local disk under Root.
func TestOpenSSH(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	cl := srv.SFTP(t)

	conn, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	if v := string(conn.ServerVersion()); !strings.HasPrefix(v, "SSH-2.0-OpenSSH") {
		t.Fatalf("server version %q, want OpenSSH", v)
	}
	conn.Close()
	if _, ok := cl.HasExtension("posix-rename@openssh.com"); !ok {
		t.Fatal("posix-rename@openssh.com not advertised")
	}

	dir := srv.Root + "/wf"
	if err := cl.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	put(t, cl, dir+"/p.json", "old")
	put(t, cl, dir+"/.p.json.tmp", "new")
	if err := cl.Rename(dir+"/.p.json.tmp", dir+"/p.json"); err == nil {
		t.Fatal("plain Rename onto an existing file succeeded; SFTP v3 forbids it")
	}
	if err := cl.PosixRename(dir+"/.p.json.tmp", dir+"/p.json"); err != nil {
		t.Fatal(err)
	}
	if got := get(t, cl, dir+"/p.json"); got != "new" {
		t.Fatalf("after PosixRename read %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(srv.Root, "wf", "p.json")); err != nil || string(b) != "new" {
		t.Fatalf("local file: %q, %v", b, err)
	}
	if err := cl.Remove(dir + "/p.json"); err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveDirectory(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stat after delete: %v, want ErrNotExist", err)
	}
}

// TestWrongHostKey checks that x/crypto's knownhosts refuses a server whose
// key is not the one recorded, and one that is not recorded at all.
func TestWrongHostKey(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	other := sshtest.Start(t, sshtest.Options{})

	// known_hosts that names srv's address with other's key.
	wrong := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, other.HostKeys[0])
	if err := os.WriteFile(wrong, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		mismatch   bool
	}{{"mismatch", wrong, true}, {"unknown", empty, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cb, err := knownhosts.New(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &ssh.ClientConfig{User: srv.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(srv.Signer)}, HostKeyCallback: cb, Timeout: 5 * time.Second}
			c, err := ssh.Dial("tcp", srv.Addr, cfg)
			if err == nil {
				c.Close()
				t.Fatal("connected despite a wrong host key")
			}
			var ke *knownhosts.KeyError
			if !errors.As(err, &ke) || (len(ke.Want) > 0) != tc.mismatch {
				t.Fatalf("err = %v, want a knownhosts.KeyError (mismatch=%v)", err, tc.mismatch)
			}
		})
	}
}

// TestSeveralHostKeys: with rsa, ecdsa and ed25519 host keys, a known_hosts
// holding all of them works; one holding only ed25519 hits the
// HostKeyAlgorithms trap of sftp.md §3.1 unless the client restricts its
// algorithms.
func TestSeveralHostKeys(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{HostKeyTypes: []string{sshtest.RSA, sshtest.ECDSA, sshtest.Ed25519}})
	if n := len(srv.KnownHostsLines()); n != 3 {
		t.Fatalf("%d known_hosts lines, want 3", n)
	}
	c, err := srv.Dial()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	only := filepath.Join(t.TempDir(), "known_hosts")
	if err := srv.WriteKnownHosts(only, sshtest.Ed25519); err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(only)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ClientConfig{User: srv.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(srv.Signer)}, HostKeyCallback: cb, Timeout: 5 * time.Second}
	if c, err := ssh.Dial("tcp", srv.Addr, cfg); err == nil {
		c.Close()
		t.Log("default algorithms negotiated ed25519 (the trap did not show with this x/crypto)")
	} else {
		t.Logf("default algorithms: %v (the trap)", err)
	}
	cfg.HostKeyAlgorithms = []string{ssh.KeyAlgoED25519}
	c, err = ssh.Dial("tcp", srv.Addr, cfg)
	if err != nil {
		t.Fatalf("with HostKeyAlgorithms=ed25519: %v", err)
	}
	c.Close()
}

// TestKillRestart: Kill breaks an open session, Restart serves again on the
// same port with the same host key.
func TestKillRestart(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	cl := srv.SFTP(t)
	if _, err := cl.Getwd(); err != nil {
		t.Fatal(err)
	}
	pid := srv.PID()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stat(srv.Root); err == nil {
		t.Fatal("session still works after Kill")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sshd %d still exists after Kill", pid)
	}
	if err := srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl2 := srv.SFTP(t)
	put(t, cl2, srv.Root+"/after", "ok")
	if got := get(t, cl2, srv.Root+"/after"); got != "ok" {
		t.Fatalf("read %q", got)
	}

	// DropConnections breaks sessions and keeps the listener.
	if err := srv.DropConnections(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl2.Stat(srv.Root); err == nil {
		t.Fatal("session still works after DropConnections")
	}
	cl3 := srv.SFTP(t)
	if _, err := cl3.Stat(srv.Root + "/after"); err != nil {
		t.Fatal(err)
	}
}

// TestInProcess covers the in-process servers used by fast unit tests.
func TestInProcess(t *testing.T) {
	dir := t.TempDir()
	for name, cl := range map[string]*sftp.Client{
		"disk":   sshtest.InProcess(t, dir),
		"memory": sshtest.InMemory(t),
	} {
		t.Run(name, func(t *testing.T) {
			root := dir
			if name == "memory" {
				root = "/m"
				if err := cl.Mkdir(root); err != nil {
					t.Fatal(err)
				}
			}
			put(t, cl, root+"/a", "x")
			if err := cl.PosixRename(root+"/a", root+"/b"); err != nil {
				t.Fatal(err)
			}
			if got := get(t, cl, root+"/b"); got != "x" {
				t.Fatalf("read %q", got)
			}
			if err := cl.Remove(root + "/b"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkStart measures sshd's start-up (keys, config, first banner):
// go test -run '^$' -bench Start -benchtime 20x ./internal/testenv/sshtest/
func BenchmarkStart(b *testing.B) {
	for _, types := range [][]string{{sshtest.Ed25519}, {sshtest.RSA, sshtest.ECDSA, sshtest.Ed25519}} {
		b.Run(strings.Join(types, "+"), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s, err := sshtest.StartContext(context.Background(), sshtest.Options{Dir: b.TempDir(), HostKeyTypes: types})
				if err != nil {
					b.Fatal(err)
				}
				s.Stop()
			}
		})
	}
}

// TestOtherUser: a server for a non-root account writes as that account and
// gets "permission denied" outside Root.
func TestOtherUser(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{User: "celos-sftp-test"})
	if srv.User != "celos-sftp-test" {
		t.Fatalf("User = %q", srv.User)
	}
	cl := srv.SFTP(t)
	put(t, cl, srv.Root+"/mine", "x")
	fi, err := os.Stat(filepath.Join(srv.Root, "mine"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Fatal("file owned by root, want the test account")
	}
	if _, err := cl.Create("/root-only-" + strconv.Itoa(os.Getpid())); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("Create in / as %s: %v, want ErrPermission", srv.User, err)
	}
}
