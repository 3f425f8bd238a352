// Package pgtest starts a real PostgreSQL server for tests: Debian's
// postgresql package (/usr/lib/postgresql/<version>/bin), initdb'd into a
// temporary data directory and run as `postgres -D <dir>` on a free
// 127.0.0.1 port, with password authentication (scram-sha-256) for a
// throw-away superuser. When the tests run as root, PostgreSQL (which
// refuses root) runs as the unprivileged user Debian's package creates,
// "postgres". Start takes about 1-3 s; CreateDB gives each test an empty
// database of its own on a shared server in about 50-200 ms.
//
//	srv := pgtest.Shared(t)          // one server per test binary
//	dsn := srv.CreateDB(t)           // postgres://celos:…@127.0.0.1:PORT/t_…
//
// Tests that stop, kill or restart the server (fault tests) start their
// own with StartT. Without PostgreSQL the test fails; CELOS_SKIP_POSTGRES=1
// skips it instead, except in CI (CI=true), where it fails. See
// docs/testing.md.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// SkipEnv is the developer's opt-out of PostgreSQL tests.
const SkipEnv = "CELOS_SKIP_POSTGRES"

// RunAsUser is the account PostgreSQL runs as when the tests run as root.
const RunAsUser = "postgres"

// Superuser is the database role the server is initialised with.
const Superuser = "celos"

// Options configure Start.
type Options struct {
	// Dir holds the data directory, socket and log. Default: a new temp
	// dir, removed by Close. When the tests run as root, every parent of
	// Dir must be searchable by RunAsUser.
	Dir string
	// Config lines appended to postgresql.conf ("max_connections = 50").
	Config []string
}

// Server is a running PostgreSQL server. Its fields do not change after
// Start; Stop, Kill and Restart change whether it runs.
type Server struct {
	Host     string // "127.0.0.1"
	Port     int
	User     string // Superuser
	Password string
	Dir      string // data directory, socket and log live under it
	bin      string
	ownDir   bool
	lock     *os.File   // ownDir: held for the server's life (removeStale)
	runAs    *user.User // nil: the current user

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// BinDir finds Debian's PostgreSQL binaries (the newest version installed).
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres); run scripts/test-deps.sh or apt-get install postgresql")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises a data directory and starts the server.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", User: Superuser, Dir: opts.Dir, bin: bin}
	if s.Dir == "" {
		removeStale(os.TempDir())
		if s.Dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		s.ownDir = true
		if s.lock, err = claimDir(s.Dir); err != nil {
			s.removeDir()
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		if s.runAs, err = user.Lookup(RunAsUser); err != nil {
			return nil, fmt.Errorf("pgtest: running as root, PostgreSQL needs the unprivileged user %q (Debian's postgresql package creates it): %w", RunAsUser, err)
		}
	}
	var pw [12]byte
	_, _ = rand.Read(pw[:])
	s.Password = hex.EncodeToString(pw[:])
	if err := s.initdb(ctx, opts.Config); err != nil {
		s.removeDir()
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		s.removeDir()
		return nil, err
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.Dir, "postgres.log") }

func (s *Server) initdb(ctx context.Context, config []string) error {
	if err := os.MkdirAll(s.dataDir(), 0o700); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	pwfile := filepath.Join(s.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if s.runAs != nil {
		// The temp dir's parents must let the postgres user through.
		if err := os.Chmod(s.Dir, 0o755); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		for _, p := range []string{s.Dir, s.dataDir(), pwfile} {
			if err := s.chown(p); err != nil {
				return err
			}
		}
	}
	cmd := s.command(ctx, "initdb", "-D", s.dataDir(), "-U", Superuser, "--pwfile="+pwfile,
		"--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	_ = os.Remove(pwfile)
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Port = port
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"port = " + strconv.Itoa(port),
		"unix_socket_directories = '" + s.Dir + "'",
		// Throw-away data: no fsync (a killed server loses nothing, the OS
		// keeps its writes; a machine crash is not what tests simulate),
		// commits still wait for the WAL write, small footprint.
		"fsync = off", "full_page_writes = off",
		"shared_buffers = 32MB", "max_connections = 200",
		"logging_collector = off",
	}
	conf = append(conf, config...)
	f, err := os.OpenFile(filepath.Join(s.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	_, err = f.WriteString("\n# pgtest\n" + strings.Join(conf, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pgtest: writing postgresql.conf: %w", err)
	}
	return nil
}

func (s *Server) chown(p string) error {
	uid, _ := strconv.Atoi(s.runAs.Uid)
	gid, _ := strconv.Atoi(s.runAs.Gid)
	if err := os.Chown(p, uid, gid); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// command runs a PostgreSQL binary as the server's user. It gets SIGQUIT
// (for postgres: the immediate shutdown) when the test binary dies, so
// that a test run killed or timed out leaves no server behind. (The
// signal goes when the thread that started it ends; Go ends none of its
// threads unless a goroutine locked to one exits, which no test here
// does.)
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if s.runAs != nil {
		uid, _ := strconv.Atoi(s.runAs.Uid)
		gid, _ := strconv.Atoi(s.runAs.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return cmd
}

func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	// Not CommandContext: the server outlives Start's context.
	cmd := s.command(context.Background(), "postgres", "-D", s.dataDir())
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("pgtest: postgres exited at start-up; last lines of %s:\n%s", s.LogPath(), s.LogTail(20))
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(pctx, s.DSN("postgres"))
		if err == nil {
			err = conn.Ping(pctx)
			_ = conn.Close(pctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Kill()
			return fmt.Errorf("pgtest: postgres did not accept connections within 60 s (%v); last lines of %s:\n%s", err, s.LogPath(), s.LogTail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DSN is a URL for database db as the superuser, password included.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", s.User, s.Password, s.Host, s.Port, db)
}

// Redact returns s with the password of every PostgreSQL connection
// string in it replaced by "xxxxx": the user information of a
// postgres:// or postgresql:// URL (url.URL.Redacted), a password=
// query parameter, and a keyword string's password=… pair (quoted or
// not; an unterminated quote runs to the end). For the messages of
// failed tests, which print DSNs and command lines holding them.
func Redact(s string) string {
	s = pgURL.ReplaceAllStringFunc(s, func(raw string) string {
		// A list printed with %v ends in "]": not the URL's (an IPv6
		// host's brackets pair up).
		end := len(raw)
		for end > 0 && raw[end-1] == ']' && strings.Count(raw[:end], "[") < strings.Count(raw[:end], "]") {
			end--
		}
		u, err := url.Parse(raw[:end])
		if err != nil {
			return "(a postgres URL that does not parse)" + raw[end:]
		}
		return u.Redacted() + raw[end:]
	})
	return passwordPair.ReplaceAllString(s, "${1}xxxxx")
}

var (
	// pgURL is a PostgreSQL URL up to the next space or quote (as %v
	// and %q print them in lists and strings).
	pgURL = regexp.MustCompile(`postgres(ql)?://[^\s"']+`)
	// passwordPair is a password= keyword or query parameter and its
	// value.
	passwordPair = regexp.MustCompile(`(password\s*=\s*)('([^'\\]|\\.)*('|$)|[^\s&]*)`)
)

// DSNNoPassword is DSN without the password (for tests of PGPASSWORD and
// .pgpass).
func (s *Server) DSNNoPassword(db string) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", s.User, s.Host, s.Port, db)
}

// Exec runs SQL statements on database db as the superuser.
func (s *Server) Exec(ctx context.Context, db string, sql ...string) error {
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return fmt.Errorf("pgtest: connecting to %s: %w", db, err)
	}
	defer conn.Close(context.Background())
	for _, q := range sql {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("pgtest: %s: %w", q, err)
		}
	}
	return nil
}

// CreateDB creates an empty database for the test, dropped at its end
// (unless the test failed, to look at), and returns its DSN.
func (s *Server) CreateDB(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || !s.Running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = s.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return s.DSN(name)
}

// Running reports whether the server process runs.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Stop shuts the server down cleanly (fast mode) and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGINT, 30*time.Second) }

// Kill kills the server (SIGKILL to its process group): a crash.
func (s *Server) Kill() { s.signal(syscall.SIGKILL, 30*time.Second) }

func (s *Server) signal(sig syscall.Signal, wait time.Duration) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	// The backends are the postmaster's children, each in its own session
	// (PostgreSQL calls setsid in every child): a kill must reach each of
	// them, and the next start must wait until all have exited, or it finds
	// their shared memory still attached ("pre-existing shared memory block
	// is still in use").
	children := childPIDs(cmd.Process.Pid)
	_ = cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		for _, pid := range children {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		alive := false
		for _, pid := range children {
			if alive = processAlive(pid); alive {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
		if !alive {
			return
		}
	}
}

// childPIDs lists the processes whose parent is pid (from /proc).
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := parentPID(n); ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// parentPID reads the parent of pid and whether it is a zombie.
func parentPID(pid int) (ppid int, zombie bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0] == "Z"
}

// processAlive reports whether pid runs (a zombie has exited and holds no
// shared memory).
func processAlive(pid int) bool {
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		return false
	}
	_, zombie := parentPID(pid)
	return !zombie
}

// Restart starts a stopped or killed server again on the same port and data.
func (s *Server) Restart(ctx context.Context) error {
	if s.Running() {
		s.Stop()
	}
	return s.start(ctx)
}

// Close stops the server and removes its directory if Start made it.
func (s *Server) Close() {
	s.Stop()
	s.removeDir()
}

func (s *Server) removeDir() {
	if s.ownDir {
		_ = os.RemoveAll(s.Dir)
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

// ownerLock is the file in a directory Start made that its test binary
// holds locked (flock) for as long as the server may run: the kernel
// lets go of it however the binary ends.
const ownerLock = "owner.lock"

// claimDir locks dir's owner file, made under another name and renamed
// into place once locked, so that removeStale never finds it unlocked
// while its server lives.
func claimDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, ownerLock+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ownerLock))
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("pgtest: lock %s: %w", dir, err)
	}
	return f, nil
}

// removeStale removes the directories (pgtest-* in tmp) that Start made
// for test binaries that died without Close: their owner file is no
// longer locked (their servers got SIGQUIT when the binary died). A
// directory without the file (being made, or by an older pgtest) is left.
func removeStale(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "pgtest-*"))
	for _, d := range dirs {
		f, err := os.OpenFile(filepath.Join(d, ownerLock), os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(d)
		}
		f.Close()
	}
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	data, err := os.ReadFile(s.LogPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartT starts a server of the test's own (for tests that stop, kill or
// restart it), closed at the end of the test. It fails the test if the
// server cannot start, or skips it when CELOS_SKIP_POSTGRES=1 (not in CI).
func StartT(t testing.TB, opts Options) *Server {
	t.Helper()
	SkipIfOptedOut(t)
	// Not t.TempDir(): its parent is private to the current user, and
	// the server may run as another (see RunAsUser).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgtest: last lines of %s:\n%s", s.LogPath(), s.LogTail(30))
		}
		s.Close()
	})
	return s
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns a server shared by the tests of the binary, started on
// first use and stopped by Main. Tests must each use their own database
// (CreateDB) and must not stop it.
func Shared(t testing.TB) *Server {
	t.Helper()
	SkipIfOptedOut(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.srv, shared.err = Start(ctx, Options{})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// Main runs the tests and stops the shared server. Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the shared server, if one was started (for a TestMain
// that also stops other shared servers).
func StopShared() {
	if shared.srv != nil {
		shared.srv.Close()
	}
}

// SkipIfOptedOut skips the test when CELOS_SKIP_POSTGRES=1. In CI
// (CI=true) nothing is skipped: the opt-out fails the test instead.
func SkipIfOptedOut(t testing.TB) {
	t.Helper()
	if os.Getenv(SkipEnv) != "1" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(SkipEnv + "=1 is not allowed in CI (CI=true): CI runs every PostgreSQL test")
	}
	t.Skip("PostgreSQL tests skipped: " + SkipEnv + "=1")
}
