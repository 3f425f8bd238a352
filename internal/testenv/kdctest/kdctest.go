// Package kdctest starts a real MIT Kerberos KDC for tests: Debian's
// krb5-kdc, krb5-admin-server and krb5-user packages. Start creates a
// realm in a temporary directory (kdb5_util create -s), runs krb5kdc in
// the foreground on a free 127.0.0.1 port (TCP and UDP) and writes a
// krb5.conf pointing at it; AddPrincipal creates principals with
// kadmin.local and exports their keys to a keytab (ktadd); Kinit fills a
// credential cache from a keytab with kinit. Starting takes well under a
// second.
//
//	kdc := kdctest.StartT(t)                       // stopped at cleanup
//	alice := kdc.AddPrincipalT(t, "alice")         // alice@CELOS.TEST, alice.keytab
//	http := kdc.AddPrincipalT(t, "HTTP/localhost") // a service's keytab
//	cache := kdc.KinitT(t, alice, "")              // FILE credential cache
//	t.Setenv("KRB5_CONFIG", kdc.Config)
//
// Without the packages the test fails; CELOS_SKIP_KERBEROS=1 skips it
// instead, except in CI (CI=true), where it fails. See docs/testing.md.
package kdctest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SkipEnv is the developer's opt-out of Kerberos tests.
const SkipEnv = "CELOS_SKIP_KERBEROS"

// Realm is the realm every KDC of this package serves.
const Realm = "CELOS.TEST"

// Enctypes are the encryption types the realm's keys and tickets use
// (both understood by MIT Kerberos and gokrb5).
const Enctypes = "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"

// Programs are the MIT Kerberos programs Start needs.
var Programs = []string{"krb5kdc", "kdb5_util", "kadmin.local", "kinit"}

// KDC is a running KDC. Its fields do not change after Start.
type KDC struct {
	Realm  string
	Dir    string // the database, keytabs, caches, configuration and log
	Config string // krb5.conf for clients (point KRB5_CONFIG at it)
	Port   int    // TCP and UDP, on 127.0.0.1
	ownDir bool
	bins   map[string]string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Principal is a principal of the realm and the keytab holding its keys.
type Principal struct {
	Name   string // with the realm: alice@CELOS.TEST, HTTP/localhost@CELOS.TEST
	Keytab string
}

// findPrograms looks the MIT programs up in $PATH and /usr/sbin.
func findPrograms() (map[string]string, error) {
	bins := make(map[string]string)
	var missing []string
	for _, p := range Programs {
		path, err := exec.LookPath(p)
		if err != nil {
			if _, serr := os.Stat("/usr/sbin/" + p); serr == nil {
				path, err = "/usr/sbin/"+p, nil
			}
		}
		if err != nil {
			missing = append(missing, p)
			continue
		}
		bins[p] = path
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("kdctest: MIT Kerberos is not installed (no %s); run scripts/test-deps.sh or apt-get install krb5-kdc krb5-admin-server krb5-user", strings.Join(missing, ", "))
	}
	return bins, nil
}

// Start creates a realm in dir ("" means a new temporary directory,
// removed by Close) and starts its KDC.
func Start(ctx context.Context, dir string) (*KDC, error) {
	bins, err := findPrograms()
	if err != nil {
		return nil, err
	}
	k := &KDC{Realm: Realm, Dir: dir, bins: bins}
	if k.Dir == "" {
		if k.Dir, err = os.MkdirTemp("", "kdctest-"); err != nil {
			return nil, fmt.Errorf("kdctest: %w", err)
		}
		k.ownDir = true
	}
	k.Config = filepath.Join(k.Dir, "krb5.conf")
	// A free port can be taken between choosing and binding it: try again.
	for attempt := 0; ; attempt++ {
		if err = k.create(ctx); err == nil {
			if err = k.start(ctx); err == nil {
				return k, nil
			}
		}
		if attempt == 2 || ctx.Err() != nil {
			k.removeDir()
			return nil, err
		}
	}
}

// freePort returns a port free for TCP and UDP on 127.0.0.1 when asked.
func freePort() (int, error) {
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("kdctest: no port free for both TCP and UDP")
}

// create writes the configuration and a new database for a free port.
func (k *KDC) create(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	k.Port = port
	db := filepath.Join(k.Dir, "db")
	_ = os.RemoveAll(db)
	if err := os.MkdirAll(db, 0o700); err != nil {
		return fmt.Errorf("kdctest: %w", err)
	}
	kdcConf := fmt.Sprintf(`[kdcdefaults]
 kdc_ports = %[2]d
 kdc_tcp_ports = %[2]d
[realms]
 %[1]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  max_life = 10h
  max_renewable_life = 7d
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  kdc_ports = %[2]d
  kdc_tcp_ports = %[2]d
 }
[logging]
 kdc = FILE:%[4]s
`, k.Realm, port, db, k.LogPath())
	krb5Conf := fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ticket_lifetime = 10h
 default_tkt_enctypes = %[3]s
 default_tgs_enctypes = %[3]s
 permitted_enctypes = %[3]s
[realms]
 %[1]s = {
  kdc = 127.0.0.1:%[2]d
 }
[domain_realm]
 localhost = %[1]s
 .localhost = %[1]s
`, k.Realm, port, Enctypes)
	if err := os.WriteFile(k.kdcConf(), []byte(kdcConf), 0o600); err != nil {
		return fmt.Errorf("kdctest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(db, "kadm5.acl"), nil, 0o600); err != nil {
		return fmt.Errorf("kdctest: %w", err)
	}
	if err := os.WriteFile(k.Config, []byte(krb5Conf), 0o644); err != nil {
		return fmt.Errorf("kdctest: %w", err)
	}
	_, err = k.run(ctx, "kdb5_util", "create", "-s", "-r", k.Realm, "-P", "celos-kdctest-master")
	return err
}

func (k *KDC) kdcConf() string { return filepath.Join(k.Dir, "kdc.conf") }

// LogPath is the KDC's log file.
func (k *KDC) LogPath() string { return filepath.Join(k.Dir, "kdc.log") }

// Env is the environment of the MIT programs run against this realm.
func (k *KDC) Env() []string {
	return append(os.Environ(), "KRB5_CONFIG="+k.Config, "KRB5_KDC_PROFILE="+k.kdcConf())
}

// run runs one of Programs and returns its combined output.
func (k *KDC) run(ctx context.Context, prog string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bins[prog], args...)
	cmd.Env = k.Env()
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kdctest: %s %s: %v: %s", prog, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// start runs krb5kdc in the foreground and waits until it accepts TCP
// connections.
func (k *KDC) start(ctx context.Context) error {
	cmd := exec.Command(k.bins["krb5kdc"], "-n", "-r", k.Realm)
	cmd.Env = k.Env()
	logf, err := os.Create(filepath.Join(k.Dir, "krb5kdc.out"))
	if err != nil {
		return fmt.Errorf("kdctest: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kdctest: start krb5kdc: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	k.mu.Lock()
	k.cmd, k.done = cmd, done
	k.mu.Unlock()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(k.Port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			out, _ := os.ReadFile(filepath.Join(k.Dir, "krb5kdc.out"))
			return fmt.Errorf("kdctest: krb5kdc exited at start: %s", strings.TrimSpace(string(out)))
		case <-ctx.Done():
			k.Stop()
			return fmt.Errorf("kdctest: krb5kdc on %s: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			k.Stop()
			return fmt.Errorf("kdctest: krb5kdc does not listen on %s after 30 s", addr)
		}
	}
}

// AddPrincipal creates name (without the realm: "alice",
// "HTTP/localhost") with a random key and exports it to
// <Dir>/<name with / as _>.keytab.
func (k *KDC) AddPrincipal(ctx context.Context, name string) (Principal, error) {
	full := name + "@" + k.Realm
	kt := filepath.Join(k.Dir, strings.ReplaceAll(name, "/", "_")+".keytab")
	if _, err := k.run(ctx, "kadmin.local", "-r", k.Realm, "-q", "addprinc -randkey "+full); err != nil {
		return Principal{}, err
	}
	out, err := k.run(ctx, "kadmin.local", "-r", k.Realm, "-q", "ktadd -k "+kt+" "+full)
	if err != nil {
		return Principal{}, err
	}
	if _, err := os.Stat(kt); err != nil {
		return Principal{}, fmt.Errorf("kdctest: ktadd %s wrote no keytab: %s", full, strings.TrimSpace(out))
	}
	return Principal{Name: full, Keytab: kt}, nil
}

// Kinit gets a TGT for p from its keytab into a new file credential cache
// and returns its path. lifetime is kinit's -l ("5s", "1h"; "" means the
// realm's default); more are kinit's other options ("-r", "30s": a
// renewable ticket).
func (k *KDC) Kinit(ctx context.Context, p Principal, lifetime string, more ...string) (string, error) {
	f, err := os.CreateTemp(k.Dir, "krb5cc_")
	if err != nil {
		return "", fmt.Errorf("kdctest: %w", err)
	}
	f.Close()
	args := []string{"-k", "-t", p.Keytab, "-c", "FILE:" + f.Name()}
	if lifetime != "" {
		args = append(args, "-l", lifetime)
	}
	args = append(args, more...)
	if _, err := k.run(ctx, "kinit", append(args, p.Name)...); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// Stop stops the KDC (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (k *KDC) Stop() {
	k.mu.Lock()
	cmd, done := k.cmd, k.done
	k.cmd = nil
	k.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Close stops the KDC and removes its directory if Start made it.
func (k *KDC) Close() {
	k.Stop()
	k.removeDir()
}

func (k *KDC) removeDir() {
	if k.ownDir {
		_ = os.RemoveAll(k.Dir)
	}
}

// LogTail is the end of the KDC's log, for a failing test.
func (k *KDC) LogTail(n int) string {
	data, _ := os.ReadFile(k.LogPath())
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StartT starts a KDC for the test, stopped at its end (the log is shown
// if the test failed). It fails the test if the KDC cannot start, or
// skips it when CELOS_SKIP_KERBEROS=1 (not in CI).
func StartT(t testing.TB) *KDC {
	t.Helper()
	SkipIfOptedOut(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kdctest: last lines of %s:\n%s", k.LogPath(), k.LogTail(30))
		}
		k.Close()
	})
	return k
}

// AddPrincipalT is AddPrincipal failing the test on error.
func (k *KDC) AddPrincipalT(t testing.TB, name string) Principal {
	t.Helper()
	p, err := k.AddPrincipal(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// KinitT is Kinit failing the test on error.
func (k *KDC) KinitT(t testing.TB, p Principal, lifetime string) string {
	t.Helper()
	cc, err := k.Kinit(context.Background(), p, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// SkipIfOptedOut skips the test when CELOS_SKIP_KERBEROS=1. In CI
// (CI=true) nothing is skipped: the opt-out fails the test instead.
func SkipIfOptedOut(t testing.TB) {
	t.Helper()
	if os.Getenv(SkipEnv) != "1" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(SkipEnv + "=1 is not allowed in CI (CI=true): CI runs every Kerberos test")
	}
	t.Skip("Kerberos tests skipped: " + SkipEnv + "=1")
}

// SetMaxLife caps the lifetime of the tickets issued to principals (names
// without the realm, "alice"; the realm's krbtgt is always included, as
// the TGT's lifetime is the shorter of its client's and krbtgt's) at d, so
// a test can see a ticket expire while a long-running client uses it.
// Tickets are renewable only when asked for (kinit -r; the krb5.conf
// written sets no renew_lifetime), up to SetMaxRenewableLife.
func (k *KDC) SetMaxLife(ctx context.Context, d time.Duration, names ...string) error {
	return k.modprinc(ctx, "-maxlife", d, names)
}

// SetMaxRenewableLife caps how long after it was first issued a ticket of
// principals (and krbtgt) can be renewed, the renew limit.
func (k *KDC) SetMaxRenewableLife(ctx context.Context, d time.Duration, names ...string) error {
	return k.modprinc(ctx, "-maxrenewlife", d, names)
}

func (k *KDC) modprinc(ctx context.Context, opt string, d time.Duration, names []string) error {
	secs := strconv.Itoa(int(d / time.Second))
	for _, n := range append([]string{"krbtgt/" + k.Realm}, names...) {
		q := "modprinc " + opt + " \"" + secs + " seconds\" " + n + "@" + k.Realm
		if _, err := k.run(ctx, "kadmin.local", "-r", k.Realm, "-q", q); err != nil {
			return err
		}
	}
	return nil
}

// Rotate gives p a new random key (a new kvno) and adds it to p's keytab,
// as an operator's ktadd does: the KDC no longer takes the old key.
func (k *KDC) Rotate(ctx context.Context, p Principal) error {
	_, err := k.run(ctx, "kadmin.local", "-r", k.Realm, "-q", "ktadd -k "+p.Keytab+" "+p.Name)
	return err
}

// Restart starts the KDC again after Stop, on the same port with the same
// database.
func (k *KDC) Restart(ctx context.Context) error {
	k.mu.Lock()
	running := k.cmd != nil
	k.mu.Unlock()
	if running {
		return errors.New("kdctest: Restart of a running KDC")
	}
	return k.start(ctx)
}

// Renew renews the TGT in the credential cache at path in place (kinit
// -R), as a cron job or k5start does for a server on a cache; it fails
// past the ticket's end or its renew limit.
func (k *KDC) Renew(ctx context.Context, path string) error {
	_, err := k.run(ctx, "kinit", "-R", "-c", "FILE:"+path)
	return err
}
