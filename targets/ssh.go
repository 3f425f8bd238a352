package targets

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/celos-go/celos/internal/regfile"
)

// SSHOptions say how celos connects to SFTP servers.
type SSHOptions struct {
	// KnownHosts are the known_hosts files host keys are checked against
	// (--known-hosts / CELOS_KNOWN_HOSTS); empty means ~/.ssh/known_hosts
	// and /etc/ssh/ssh_known_hosts, those that exist. An explicitly named
	// file must exist.
	KnownHosts []string
	// InsecureIgnoreHostKey skips host key verification entirely
	// (--insecure-ignore-host-key). Never use it in production.
	InsecureIgnoreHostKey bool
	// Identities are private key files (--identity / CELOS_SSH_IDENTITY);
	// empty means ~/.ssh/id_ed25519, id_ecdsa, id_rsa, those that exist.
	Identities []string
	// NoAgent disables ssh-agent ($SSH_AUTH_SOCK), which is tried first.
	NoAgent bool
	// Passphrase decrypts encrypted key files (CELOS_SSH_PASSPHRASE).
	Passphrase string
	// Timeout bounds the TCP connect and the SSH handshake (default 30 s).
	Timeout time.Duration
}

// SSHOptionsFromEnv fills the options the environment can set:
// CELOS_KNOWN_HOSTS, CELOS_SSH_IDENTITY (both path lists) and
// CELOS_SSH_PASSPHRASE. Values already set are kept.
func SSHOptionsFromEnv(o SSHOptions) SSHOptions {
	if len(o.KnownHosts) == 0 {
		o.KnownHosts = filepath.SplitList(os.Getenv("CELOS_KNOWN_HOSTS"))
	}
	if len(o.Identities) == 0 {
		o.Identities = filepath.SplitList(os.Getenv("CELOS_SSH_IDENTITY"))
	}
	if o.Passphrase == "" {
		o.Passphrase = os.Getenv("CELOS_SSH_PASSPHRASE")
	}
	return o
}

func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return ""
}

// maxKeyFile bounds the bytes read from a private key file.
const maxKeyFile = 1 << 20

// checkRegular refuses a file that is not a regular file (a named pipe
// blocks the reader that opens it, a device is read without end) before
// knownhosts.New opens it, which takes only names. Opening it here never
// blocks (regfile); a file swapped in between the two opens is not caught.
func checkRegular(path string) error {
	f, _, err := regfile.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

func (o SSHOptions) knownHostsFiles() ([]string, error) {
	if len(o.KnownHosts) > 0 {
		for _, f := range o.KnownHosts {
			if err := checkRegular(f); err != nil {
				return nil, fmt.Errorf("known_hosts file: %w", err)
			}
		}
		return o.KnownHosts, nil
	}
	var files []string
	for _, f := range []string{filepath.Join(homeDir(), ".ssh", "known_hosts"), "/etc/ssh/ssh_known_hosts"} {
		switch err := checkRegular(f); {
		case err == nil:
			files = append(files, f)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("known_hosts file: %w", err)
		}
	}
	return files, nil
}

// hostKeys checks server host keys against known_hosts and explains a
// refusal. It also computes the HostKeyAlgorithms to offer: x/crypto/ssh
// otherwise negotiates the server's preferred key type, and when
// known_hosts lists another type of the same host the check fails as a
// "mismatch" (golang/go#29286; sftp.md §3.1).
type hostKeys struct {
	files    []string
	callback ssh.HostKeyCallback
	// addTo and makeDir are HostKeyError's.
	addTo, makeDir string
}

func newHostKeys(files []string) (*hostKeys, error) {
	h := &hostKeys{files: files}
	if len(files) == 0 {
		return h, nil
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts: %w", err)
	}
	h.callback = cb
	return h, nil
}

var probeKey = sync.OnceValue(func() ssh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(nil)
	k, _ := ssh.NewPublicKey(pub)
	return k
})

// algorithms returns the host key algorithms known_hosts has keys of for
// addr ("host:port"), most preferred first; nil when the host is unknown.
func (h *hostKeys) algorithms(addr string) []string {
	if h.callback == nil {
		return nil
	}
	err := h.callback(addr, fakeRemote(addr), probeKey())
	var ke *knownhosts.KeyError
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algos = append(algos, x)
			}
		}
	}
	for _, w := range ke.Want {
		switch t := w.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}

func fakeRemote(addr string) net.Addr {
	_, port, _ := net.SplitHostPort(addr)
	var p int
	fmt.Sscan(port, &p)
	return &net.TCPAddr{IP: net.IPv4zero, Port: p}
}

// HostKeyError is a refused host key: unknown, or different from the one
// known_hosts holds. Its message says how to fix it.
type HostKeyError struct {
	Addr    string // host:port
	Key     ssh.PublicKey
	Files   []string
	Changed bool
	// Want are the known keys (Changed only): "file:line type fingerprint".
	Want []string
	// AddTo is the known_hosts file the message tells to add the key to
	// (default: the first of Files, else ~/.ssh/known_hosts); MakeDir, when
	// set, is a directory to create first (~/.ssh where it does not exist).
	AddTo, MakeDir string
}

func (e *HostKeyError) Error() string {
	host := knownhosts.Normalize(e.Addr)
	files := strings.Join(e.Files, ", ")
	target := "~/.ssh/known_hosts"
	if e.AddTo != "" && !e.Changed { // a changed key is replaced where it is
		target = e.AddTo
	} else if len(e.Files) > 0 {
		target = e.Files[0]
	}
	h, port, _ := net.SplitHostPort(e.Addr)
	scan := "ssh-keyscan -t " + e.Key.Type() + " " + h
	if port != DefaultSSHPort {
		scan = "ssh-keyscan -p " + port + " -t " + e.Key.Type() + " " + h
	}
	if e.MakeDir != "" && !e.Changed {
		scan = "mkdir -p -m 700 " + e.MakeDir + " && " + scan
	}
	line := knownhosts.Line([]string{host}, e.Key)
	if e.Changed {
		return fmt.Sprintf("HOST KEY CHANGED for %s: the server presented %s %s, but known_hosts has %s. "+
			"Someone may be intercepting the connection (man-in-the-middle), or the server's key was replaced. "+
			"If the new key is expected (check its fingerprint with the server's administrator), remove the old entry with "+
			"`ssh-keygen -R '%s' -f %s` and add the new one: `%s >> %s` (or add this line: %s)",
			host, e.Key.Type(), ssh.FingerprintSHA256(e.Key), strings.Join(e.Want, "; "), host, target, scan, target, line)
	}
	if len(e.Files) == 0 {
		files = "no known_hosts file exists"
	}
	return fmt.Sprintf("unknown host key for %s (%s %s; checked: %s). "+
		"Verify the fingerprint with the server's administrator, then add it to known_hosts: `%s >> %s` "+
		"(or add this line: %s), or point --known-hosts / CELOS_KNOWN_HOSTS at a file that has it",
		host, e.Key.Type(), ssh.FingerprintSHA256(e.Key), files, scan, target, line)
}

// check is the HostKeyCallback: it records a refusal as a *HostKeyError.
func (h *hostKeys) check(refusal *error) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		var err error
		if h.callback == nil {
			err = &knownhosts.KeyError{}
		} else {
			err = h.callback(hostname, remote, key)
		}
		if err == nil {
			return nil
		}
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &ke):
			he := &HostKeyError{Addr: hostname, Key: key, Files: h.files, Changed: len(ke.Want) > 0, AddTo: h.addTo, MakeDir: h.makeDir}
			for _, w := range ke.Want {
				he.Want = append(he.Want, fmt.Sprintf("%s:%d %s %s", w.Filename, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key)))
			}
			err = he
		case errors.As(err, &re):
			err = fmt.Errorf("host key %s %s of %s is marked @revoked in %s:%d", key.Type(), ssh.FingerprintSHA256(key), hostname, re.Revoked.Filename, re.Revoked.Line)
		}
		*refusal = err
		return err
	}
}

// authMethods returns ssh-agent's keys, then the key files, and a note on
// keys that could not be used (for the error when authentication fails).
func (o SSHOptions) authMethods() (methods []ssh.AuthMethod, notes []string, cleanup func(), err error) {
	cleanup = func() {}
	var signers []ssh.Signer
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" && !o.NoAgent {
		conn, err := net.DialTimeout("unix", sock, 5*time.Second)
		if err != nil {
			notes = append(notes, fmt.Sprintf("ssh-agent at %s: %v", sock, err))
		} else {
			cleanup = func() { conn.Close() }
			ag := agent.NewClient(conn)
			if s, err := ag.Signers(); err != nil {
				notes = append(notes, fmt.Sprintf("ssh-agent: %v", err))
			} else {
				signers = append(signers, s...)
				notes = append(notes, fmt.Sprintf("ssh-agent (%d keys)", len(s)))
			}
		}
	}
	explicit := len(o.Identities) > 0
	files := o.Identities
	if !explicit {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			files = append(files, filepath.Join(homeDir(), ".ssh", n))
		}
	}
	for _, f := range files {
		pem, err := regfile.ReadFile(f, maxKeyFile)
		if err != nil {
			if explicit {
				cleanup()
				return nil, nil, nil, fmt.Errorf("SSH identity %s: %w", f, err)
			}
			continue
		}
		s, err := ssh.ParsePrivateKey(pem)
		var pe *ssh.PassphraseMissingError
		if errors.As(err, &pe) {
			if o.Passphrase == "" {
				notes = append(notes, fmt.Sprintf("%s needs a passphrase: load it into ssh-agent (ssh-add %s) or set CELOS_SSH_PASSPHRASE", f, f))
				continue
			}
			s, err = ssh.ParsePrivateKeyWithPassphrase(pem, []byte(o.Passphrase))
		}
		if err != nil {
			if explicit {
				cleanup()
				return nil, nil, nil, fmt.Errorf("SSH identity %s: %w", f, err)
			}
			notes = append(notes, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		signers = append(signers, s)
		notes = append(notes, f)
	}
	if len(signers) == 0 {
		cleanup()
		return nil, notes, nil, fmt.Errorf("no SSH key to authenticate with: start ssh-agent and ssh-add a key, or pass --identity FILE (CELOS_SSH_IDENTITY)%s", noteSuffix(notes))
	}
	return []ssh.AuthMethod{ssh.PublicKeys(signers...)}, notes, cleanup, nil
}

func noteSuffix(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return " (tried: " + strings.Join(notes, "; ") + ")"
}

// DialSSH connects and authenticates to addr ("host:port") as user,
// verifying the host key. ctx bounds the connect and handshake.
func DialSSH(ctx context.Context, addr, user string, o SSHOptions) (*ssh.Client, error) {
	if user == "" {
		user = currentUser()
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var hk *hostKeys
	var refusal error
	cfg := &ssh.ClientConfig{User: user, Timeout: timeout}
	if o.InsecureIgnoreHostKey {
		cfg.HostKeyCallback = ssh.InsecureIgnoreHostKey()
	} else {
		files, err := o.knownHostsFiles()
		if err != nil {
			return nil, err
		}
		if hk, err = newHostKeys(files); err != nil {
			return nil, err
		}
		if len(o.KnownHosts) == 0 {
			// The hint appends to the user's own file, creating ~/.ssh
			// first where it does not exist.
			hk.addTo = "~/.ssh/known_hosts"
			if _, err := os.Stat(filepath.Join(homeDir(), ".ssh")); errors.Is(err, fs.ErrNotExist) {
				hk.makeDir = "~/.ssh"
			}
		}
		cfg.HostKeyCallback = hk.check(&refusal)
		cfg.HostKeyAlgorithms = hk.algorithms(addr)
	}
	methods, notes, cleanup, err := o.authMethods()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cfg.Auth = methods

	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{KeepAlive: 15 * time.Second}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	deadline, _ := dctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(dctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	stop()
	if err != nil {
		conn.Close()
		if refusal != nil {
			return nil, refusal
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, fmt.Errorf("ssh %s@%s: the server refused every key%s; pass --identity FILE, load the key into ssh-agent, or set CELOS_CI_USERNAME to the right user", user, addr, noteSuffix(notes))
		}
		// The connection's deadline is the context's: its read may time out
		// before the context's own timer has fired.
		if ctx.Err() == nil && (dctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded)) {
			return nil, fmt.Errorf("ssh %s: no SSH handshake within %s: %w", addr, timeout, err)
		}
		return nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	client := ssh.NewClient(c, chans, reqs)
	go keepAlive(client, 15*time.Second)
	return client, nil
}

// keepAlive closes the connection when the server stops answering, so a
// dead server turns into errors instead of a hang.
func keepAlive(c *ssh.Client, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		res := make(chan error, 1)
		go func() {
			_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
			res <- err
		}()
		select {
		case err := <-res:
			if err != nil {
				return // closed
			}
		case <-time.After(3 * every):
			c.Close()
			return
		}
	}
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}
