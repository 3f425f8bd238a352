// Package sshtest starts a real OpenSSH sftp server for tests: Debian's
// /usr/sbin/sshd as `sshd -D -e -f <generated config>` on a free 127.0.0.1
// port, with throw-away host keys, a throw-away client key in its
// AuthorizedKeysFile and `Subsystem sftp internal-sftp`, running as (and
// accepting) the current user. Start takes about 0.1-0.3 s, so each test
// may have its own server.
//
//	srv := sshtest.Start(t, sshtest.Options{})
//	cl := srv.SFTP(t)                     // a connected *sftp.Client
//	url := srv.URL(srv.Root + "/wf")      // sftp://root@127.0.0.1:PORT/...
//
// For fast unit tests that need no real daemon, InProcess and InMemory give a
// *sftp.Client served by pkg/sftp in the same process. See docs/testing.md.
package sshtest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHD is the OpenSSH daemon the package runs.
const SSHD = "/usr/sbin/sshd"

// Host key types for Options.HostKeyTypes.
const (
	Ed25519 = "ed25519"
	RSA     = "rsa"
	ECDSA   = "ecdsa"
)

// Options configure Start. The zero value gives one ed25519 host key.
type Options struct {
	// HostKeyTypes lists the server's host keys, from Ed25519, RSA and
	// ECDSA (default: Ed25519 alone). Several types let a test reproduce
	// the HostKeyAlgorithms trap (a known_hosts file with only one of
	// them; see WriteKnownHosts).
	HostKeyTypes []string
	// Dir holds keys, config, log and Root. Default: t.TempDir() for
	// Start, a new temp dir (removed by Stop) for StartContext.
	Dir string
	// Config is appended to the generated sshd_config.
	Config string
	// User, when set and not the current user, is the one account the
	// server accepts (for permission tests). It is created if missing
	// (useradd, no home, nologin shell, unlocked; needs root) and kept.
	// Root and the authorized_keys file then live in a world-readable temp
	// dir, Root owned by User.
	User string
}

// Server is a running sshd. Its fields do not change after Start.
type Server struct {
	Addr string // "127.0.0.1:PORT"
	Host string // "127.0.0.1"
	Port int
	User string // the one user the server accepts, with Signer: the current user or Options.User

	Dir            string     // the server's files
	Root           string     // an empty scratch directory (absolute path) for uploads
	ClientKeyPath  string     // the client's private key (OpenSSH format, no passphrase); .pub beside it
	Signer         ssh.Signer // the same key
	KnownHostsPath string     // a known_hosts file with every host key
	HostKeys       []ssh.PublicKey
	ConfigPath     string // sshd_config
	LogPath        string // sshd's log (LogLevel VERBOSE)

	hostKeyTypes   []string
	ownDir         bool
	authorizedKeys string
	sharedDir      string // Root and authorized_keys for Options.User

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logFile *os.File
	stopped bool
}

// Start starts a server for the test and stops it at cleanup. It fails the
// test if sshd is missing or does not start.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := StartContext(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sshtest: last lines of %s:\n%s", s.LogPath, s.LogTail(20))
		}
		s.Stop()
	})
	return s
}

// StartContext starts a server; the caller must Stop it.
func StartContext(ctx context.Context, opts Options) (*Server, error) {
	if _, err := os.Stat(SSHD); err != nil {
		return nil, fmt.Errorf("sshtest: %s not found: install Debian's openssh-server (apt-get install openssh-server; `make deps` does it as root)", SSHD)
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("sshtest: sshd needs its privilege separation directory /run/sshd: %v (as root: install -d -m 0755 /run/sshd)", err)
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("sshtest: current user: %w", err)
	}
	if len(opts.HostKeyTypes) == 0 {
		opts.HostKeyTypes = []string{Ed25519}
	}
	s := &Server{Host: "127.0.0.1", User: u.Username, Dir: opts.Dir, hostKeyTypes: opts.HostKeyTypes}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "celos-sshd-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	if err := s.setup(opts); err != nil {
		s.cleanupDir()
		return nil, err
	}
	if opts.User != "" && opts.User != u.Username {
		if err := s.otherUser(opts.User); err != nil {
			s.cleanupDir()
			return nil, err
		}
	}
	// A free port can be taken between our probe and sshd's bind: try a
	// few.
	for attempt := 0; ; attempt++ {
		if s.Port, err = freePort(); err != nil {
			s.cleanupDir()
			return nil, err
		}
		s.Addr = net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
		if err = s.writeConfig(opts.Config); err == nil {
			err = s.start(ctx)
		}
		if err == nil || attempt == 2 || !strings.Contains(s.LogTail(20), "Address already in use") {
			break
		}
	}
	if err != nil {
		s.Stop()
		return nil, err
	}
	// The known_hosts file names the port, so it is written once the port
	// is final.
	if err := s.WriteKnownHosts(s.KnownHostsPath); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// setup makes the keys, the authorized_keys file and Root.
func (s *Server) setup(opts Options) error {
	s.Root = filepath.Join(s.Dir, "root")
	s.ClientKeyPath = filepath.Join(s.Dir, "id_ed25519")
	s.KnownHostsPath = filepath.Join(s.Dir, "known_hosts")
	s.ConfigPath = filepath.Join(s.Dir, "sshd_config")
	s.LogPath = filepath.Join(s.Dir, "sshd.log")
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return err
	}
	for _, typ := range opts.HostKeyTypes {
		pub, err := writeKey(filepath.Join(s.Dir, "host_"+typ), typ, "sshtest-host")
		if err != nil {
			return err
		}
		s.HostKeys = append(s.HostKeys, pub)
	}
	pub, err := writeKey(s.ClientKeyPath, Ed25519, "sshtest-client")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(s.ClientKeyPath)
	if err != nil {
		return err
	}
	if s.Signer, err = ssh.ParsePrivateKey(b); err != nil {
		return err
	}
	s.authorizedKeys = filepath.Join(s.Dir, "authorized_keys")
	return os.WriteFile(s.authorizedKeys, ssh.MarshalAuthorizedKey(pub), 0o644)
}

// otherUser makes the server accept name instead of the current user: the
// account is created if missing, and Root and authorized_keys move to a
// directory that user can reach (sshd reads the keys with its uid).
func (s *Server) otherUser(name string) error {
	if _, err := user.Lookup(name); err != nil {
		if out, err := exec.Command("useradd", "-M", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			return fmt.Errorf("sshtest: useradd %s (needs root): %v: %s", name, err, out)
		}
	}
	// useradd leaves the account locked, which sshd refuses without PAM.
	if out, err := exec.Command("usermod", "-p", "*", name).CombinedOutput(); err != nil {
		return fmt.Errorf("sshtest: usermod -p '*' %s: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	pub, err := os.ReadFile(s.authorizedKeys)
	if err != nil {
		return err
	}
	shared, err := os.MkdirTemp("", "celos-sftp-"+name+"-")
	if err != nil {
		return err
	}
	s.sharedDir = shared
	if err := os.Chmod(shared, 0o755); err != nil {
		return err
	}
	s.authorizedKeys = filepath.Join(shared, "authorized_keys")
	if err := os.WriteFile(s.authorizedKeys, pub, 0o644); err != nil {
		return err
	}
	s.Root = filepath.Join(shared, "root")
	if err := os.Mkdir(s.Root, 0o755); err != nil {
		return err
	}
	s.User = name
	return os.Chown(s.Root, uid, gid)
}

// writeKey generates a key of the type, writes the private key (0600, as
// sshd demands for host keys) and the .pub, and returns the public key.
func writeKey(path, typ, comment string) (ssh.PublicKey, error) {
	var priv any
	var err error
	switch typ {
	case Ed25519:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case RSA:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case ECDSA:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, fmt.Errorf("sshtest: unknown key type %q (want %s, %s or %s)", typ, Ed25519, RSA, ECDSA)
	}
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	pub := signer.PublicKey()
	return pub, os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(pub), 0o644)
}

func (s *Server) writeConfig(extra string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "ListenAddress %s\nPort %d\n", s.Host, s.Port)
	for _, typ := range s.hostKeyTypes {
		fmt.Fprintf(&b, "HostKey %s\n", filepath.Join(s.Dir, "host_"+typ))
	}
	fmt.Fprintf(&b, `PidFile %s
AuthorizedKeysFile %s
StrictModes no
UsePAM no
UseDNS no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowUsers %s
MaxStartups 100
MaxSessions 100
Subsystem sftp internal-sftp
LogLevel VERBOSE
%s
`, filepath.Join(s.Dir, "sshd.pid"), s.authorizedKeys, s.User, extra)
	return os.WriteFile(s.ConfigPath, []byte(b.String()), 0o644)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs sshd and waits until it answers with an SSH banner.
func (s *Server) start(ctx context.Context) error {
	if out, err := exec.Command(SSHD, "-t", "-f", s.ConfigPath).CombinedOutput(); err != nil {
		return fmt.Errorf("sshtest: sshd -t rejects %s: %v: %s", s.ConfigPath, err, out)
	}
	logFile, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Stdin and stdout are not ours: an inherited pipe would keep a
	// caller's $(...) or pipe open (sftp.md §3.5).
	cmd := exec.Command(SSHD, "-D", "-e", "-f", s.ConfigPath)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("sshtest: start sshd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.logFile, s.stopped = cmd, exited, logFile, false
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		if banner(s.Addr) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("sshtest: sshd exited at start-up; last lines of %s:\n%s", s.LogPath, s.LogTail(20))
		case <-ctx.Done():
			s.Kill()
			return fmt.Errorf("sshtest: sshd not answering on %s: %v; last lines of %s:\n%s", s.Addr, ctx.Err(), s.LogPath, s.LogTail(20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// banner reports whether an SSH server answers on addr.
func banner(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// PID is the listening sshd's process id.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// URL is "sftp://USER@127.0.0.1:PORT" followed by p (an absolute path).
func (s *Server) URL(p string) string {
	return fmt.Sprintf("sftp://%s@%s%s", s.User, s.Addr, p)
}

// KnownHostsLines returns one known_hosts line per host key, in the order of
// Options.HostKeyTypes, e.g. "[127.0.0.1]:PORT ssh-ed25519 AAAA...".
func (s *Server) KnownHostsLines() []string {
	var lines []string
	for _, k := range s.HostKeys {
		lines = append(lines, knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, k))
	}
	return lines
}

// WriteKnownHosts writes a known_hosts file with the host keys of the given
// types (all of them when none is given).
func (s *Server) WriteKnownHosts(path string, keyTypes ...string) error {
	var b strings.Builder
	for i, line := range s.KnownHostsLines() {
		if len(keyTypes) > 0 && !contains(keyTypes, s.hostKeyTypes[i]) {
			continue
		}
		b.WriteString(line + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ClientConfig is an ssh.ClientConfig for User with Signer, checking the
// host key against KnownHostsPath.
func (s *Server) ClientConfig() (*ssh.ClientConfig, error) {
	cb, err := knownhosts.New(s.KnownHostsPath)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{
		User:            s.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(s.Signer)},
		HostKeyCallback: cb,
		Timeout:         10 * time.Second,
	}, nil
}

// Dial connects with ClientConfig.
func (s *Server) Dial() (*ssh.Client, error) {
	cfg, err := s.ClientConfig()
	if err != nil {
		return nil, err
	}
	return ssh.Dial("tcp", s.Addr, cfg)
}

// SFTP returns a connected sftp client, closed at the end of the test.
func (s *Server) SFTP(t testing.TB) *sftp.Client {
	t.Helper()
	conn, err := s.Dial()
	if err != nil {
		t.Fatalf("sshtest: dial %s: %v", s.Addr, err)
	}
	cl, err := sftp.NewClient(conn)
	if err != nil {
		conn.Close()
		t.Fatalf("sshtest: sftp subsystem: %v", err)
	}
	t.Cleanup(func() { cl.Close(); conn.Close() })
	return cl
}

// Kill SIGKILLs the listening sshd and every session process it forked, so
// open connections break at once (e.g. to cut a deploy mid-upload). Restart
// brings the server back on the same port with the same keys.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	kids := descendants(cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGKILL)
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-exited
	return nil
}

// DropConnections SIGKILLs the session processes (every open connection
// breaks) and leaves the listener running, so new connections work.
func (s *Server) DropConnections() error {
	for _, pid := range descendants(s.PID()) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// FreezeSessions SIGSTOPs the processes that serve the open sessions
// (with internal-sftp, one per SFTP session: the leaves of the process
// tree), leaving the listener and each connection's own process running:
// the SSH connection answers keep-alives, but no SFTP request is answered
// (as an sftp-server stuck on a hung NFS mount). thaw SIGCONTs them.
func (s *Server) FreezeSessions() (thaw func()) {
	var frozen []int
	for _, pid := range descendants(s.PID()) {
		if len(descendants(pid)) == 0 {
			if syscall.Kill(pid, syscall.SIGSTOP) == nil {
				frozen = append(frozen, pid)
			}
		}
	}
	return func() {
		for _, pid := range frozen {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}

// Restart kills the server if it runs and starts it again on the same port.
func (s *Server) Restart(ctx context.Context) error {
	s.Kill()
	s.mu.Lock()
	if s.logFile != nil {
		s.logFile.Close()
	}
	s.mu.Unlock()
	var err error
	for i := 0; i < 50; i++ { // the port may linger a moment
		if err = s.start(ctx); err == nil || !strings.Contains(s.LogTail(5), "Address already in use") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Stop kills the server and its sessions and removes Dir if StartContext
// made it. Start's cleanup calls it; calling it again is harmless.
func (s *Server) Stop() error {
	s.Kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.logFile != nil {
		s.logFile.Close()
	}
	s.cleanupDir()
	return nil
}

func (s *Server) cleanupDir() {
	if os.Getenv("CELOS_KEEP_TESTENV") == "1" {
		return
	}
	if s.ownDir {
		os.RemoveAll(s.Dir)
	}
	if s.sharedDir != "" {
		os.RemoveAll(s.sharedDir)
	}
}

// LogTail returns the last n lines of sshd's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// descendants lists the processes below pid (sshd's per-connection
// children call setsid, so a process group does not reach them).
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}
