package targets

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/celos-go/celos/internal/testenv/sshtest"
)

// sshOpts are options that authenticate to srv with its client key only.
func sshOpts(srv *sshtest.Server) SSHOptions {
	return SSHOptions{KnownHosts: []string{srv.KnownHostsPath}, Identities: []string{srv.ClientKeyPath}, NoAgent: true, Timeout: 10 * time.Second}
}

func TestSSHKnownHostsAccepted(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	c, err := DialSSH(context.Background(), srv.Addr, srv.User, sshOpts(srv))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestSSHHostKeyAlgorithms is the trap of sftp.md §3.1: a server with RSA,
// ECDSA and ed25519 host keys, and a known_hosts that lists only one of
// them. Plain x/crypto/ssh negotiates another type and reports a mismatch;
// DialSSH offers only the algorithms known_hosts has keys of.
func TestSSHHostKeyAlgorithms(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{HostKeyTypes: []string{sshtest.Ed25519, sshtest.RSA, sshtest.ECDSA}})
	for _, typ := range []string{sshtest.Ed25519, sshtest.RSA, sshtest.ECDSA} {
		t.Run(typ, func(t *testing.T) {
			kh := filepath.Join(t.TempDir(), "known_hosts")
			if err := srv.WriteKnownHosts(kh, typ); err != nil {
				t.Fatal(err)
			}
			o := sshOpts(srv)
			o.KnownHosts = []string{kh}
			c, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
			if err != nil {
				t.Fatalf("known_hosts with only %s: %v", typ, err)
			}
			c.Close()
		})
	}
	// The trap is real: without HostKeyAlgorithms, x/crypto/ssh fails for
	// a known_hosts that holds only the RSA key (the server prefers
	// another type), so the test above can fail.
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := srv.WriteKnownHosts(kh, sshtest.RSA); err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(kh)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{User: srv.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(srv.Signer)}, HostKeyCallback: cb, Timeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "key mismatch") {
		t.Fatalf("plain x/crypto/ssh with an RSA-only known_hosts: want a key mismatch, got %v", err)
	}
}

func TestSSHUnknownHostRefused(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := sshOpts(srv)
	o.KnownHosts = []string{empty}
	_, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
	var he *HostKeyError
	if !errors.As(err, &he) || he.Changed {
		t.Fatalf("want an unknown-host HostKeyError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"unknown host key", knownhosts.Normalize(srv.Addr), ssh.FingerprintSHA256(srv.HostKeys[0]), "ssh-keyscan -p", ">> " + empty} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	// Following the message's advice fixes it.
	if err := os.WriteFile(empty, []byte(knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, he.Key)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err != nil {
		t.Fatalf("after adding the key: %v", err)
	}
	c.Close()

	// An explicitly named known_hosts file that does not exist is an error.
	o.KnownHosts = []string{filepath.Join(t.TempDir(), "nope")}
	if _, err := DialSSH(context.Background(), srv.Addr, srv.User, o); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing known_hosts: %v", err)
	}
	// With no known_hosts at all (no ~/.ssh/known_hosts), the host is unknown.
	t.Setenv("HOME", t.TempDir())
	o.KnownHosts = nil
	if _, err := DialSSH(context.Background(), srv.Addr, srv.User, o); !errors.As(err, &he) || !strings.Contains(err.Error(), "no known_hosts file exists") {
		t.Fatalf("no known_hosts: %v", err)
	}
	// The loudly named switch skips the check.
	o.InsecureIgnoreHostKey = true
	c, err = DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestSSHChangedHostKeyRefused(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	other := sshtest.Start(t, sshtest.Options{}) // another server's key under srv's name
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, other.HostKeys[0])
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := sshOpts(srv)
	o.KnownHosts = []string{kh}
	_, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
	var he *HostKeyError
	if !errors.As(err, &he) || !he.Changed {
		t.Fatalf("want a changed-key HostKeyError, got %v", err)
	}
	for _, want := range []string{"HOST KEY CHANGED", "man-in-the-middle", "ssh-keygen -R '" + knownhosts.Normalize(srv.Addr) + "' -f " + kh,
		ssh.FingerprintSHA256(srv.HostKeys[0]), ssh.FingerprintSHA256(other.HostKeys[0]), kh + ":1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%s", want, err)
		}
	}
}

func TestSSHAuthentication(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	dir := t.TempDir()

	// A key the server does not know: refused, with a hint.
	stranger := filepath.Join(dir, "stranger")
	keygen(t, stranger, "")
	o := sshOpts(srv)
	o.Identities = []string{stranger}
	_, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err == nil || !strings.Contains(err.Error(), "refused every key") || !strings.Contains(err.Error(), stranger) {
		t.Fatalf("unknown key: %v", err)
	}
	// A missing explicit identity is named.
	o.Identities = []string{filepath.Join(dir, "missing")}
	if _, err := DialSSH(context.Background(), srv.Addr, srv.User, o); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing identity: %v", err)
	}

	// An encrypted copy of the authorized key: needs the passphrase.
	enc := filepath.Join(dir, "enc")
	data, err := os.ReadFile(srv.ClientKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(enc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-p", "-N", "s3cret", "-P", "", "-f", enc).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -p: %v\n%s", err, out)
	}
	o.Identities = []string{enc}
	if _, err := DialSSH(context.Background(), srv.Addr, srv.User, o); err == nil || !strings.Contains(err.Error(), "needs a passphrase") {
		t.Fatalf("encrypted key without passphrase: %v", err)
	}
	o.Passphrase = "wrong"
	if _, err := DialSSH(context.Background(), srv.Addr, srv.User, o); err == nil || !strings.Contains(err.Error(), enc) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	o.Passphrase = "s3cret"
	c, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err != nil {
		t.Fatalf("with passphrase: %v", err)
	}
	c.Close()

	// ssh-agent first: the encrypted key loaded into an agent, and no
	// usable key file.
	sock := filepath.Join(dir, "agent.sock")
	agentCmd := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agentCmd.Start(); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	t.Cleanup(func() { agentCmd.Process.Kill(); agentCmd.Wait() })
	waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil })
	add := exec.Command("ssh-add", srv.ClientKeyPath)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
	t.Setenv("SSH_AUTH_SOCK", sock)
	t.Setenv("HOME", dir) // no default key files
	o = sshOpts(srv)
	o.Identities, o.NoAgent = nil, false
	c, err = DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	c.Close()
	o.NoAgent = true
	if _, err := DialSSH(context.Background(), srv.Addr, srv.User, o); err == nil || !strings.Contains(err.Error(), "no SSH key") {
		t.Fatalf("no agent, no keys: %v", err)
	}

	// Without --identity, the default key files of ~/.ssh are used: a
	// stranger's id_ed25519 is tried, and the authorized key as id_rsa
	// (whatever its type: the name is what counts) gets in.
	if err := os.MkdirAll(filepath.Join(dir, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	keygen(t, filepath.Join(dir, ".ssh", "id_ed25519"), "")
	if _, err := DialSSH(context.Background(), srv.Addr, srv.User, o); err == nil || !strings.Contains(err.Error(), "id_ed25519") {
		t.Fatalf("a default key the server does not know: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".ssh", "id_rsa"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err != nil {
		t.Fatalf("default key files: %v", err)
	}
	c.Close()
}

func TestSSHHandshakeTimeout(t *testing.T) {
	// A server that accepts TCP and never speaks SSH.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	o := SSHOptions{InsecureIgnoreHostKey: true, Identities: []string{writeKey(t)}, NoAgent: true, Timeout: 500 * time.Millisecond}
	_, err = DialSSH(context.Background(), ln.Addr().String(), "u", o)
	if err == nil || !strings.Contains(err.Error(), "no SSH handshake within 500ms") {
		t.Fatalf("silent server: want the handshake timeout named, got %v", err)
	}
}

func writeKey(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "id")
	keygen(t, p, "")
	return p
}

func keygen(t *testing.T, path, pass string) {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", pass, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("timed out")
}

// TestSSHUnknownHostHintCreatesSSHDir: with the default known_hosts files
// and no ~/.ssh, the suggested command creates ~/.ssh before appending to
// ~/.ssh/known_hosts, and running it (the line it appends) fixes the
// connection.
func TestSSHUnknownHostHintCreatesSSHDir(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Options{})
	home := t.TempDir()
	t.Setenv("HOME", home)
	o := sshOpts(srv)
	o.KnownHosts = nil
	_, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
	var he *HostKeyError
	if !errors.As(err, &he) {
		t.Fatalf("want a HostKeyError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"`mkdir -p -m 700 ~/.ssh && ssh-keyscan -p ", " >> ~/.ssh/known_hosts`"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	// Where ~/.ssh exists, no mkdir.
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err == nil || strings.Contains(err.Error(), "mkdir") || !strings.Contains(err.Error(), ">> ~/.ssh/known_hosts`") {
		t.Fatalf("with ~/.ssh: %v", err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, he.Key)
	if err := os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := DialSSH(context.Background(), srv.Addr, srv.User, o)
	if err != nil {
		t.Fatalf("after adding the key to ~/.ssh/known_hosts: %v", err)
	}
	c.Close()
}
