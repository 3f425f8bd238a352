package oozie

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/spnego"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// AuthCookie is the cookie Hadoop's AuthenticationFilter (in front of
// Oozie) sets once a SPNEGO negotiation succeeded; later requests that
// carry it need no new Kerberos ticket.
const AuthCookie = "hadoop.auth"

// KerberosLogin returns a logged-in Kerberos client
// (hadoopconf.KerberosClient). SPNEGO calls it at the first request and
// again when no ticket can be had, so a credential cache renewed by kinit
// is read afresh.
type KerberosLogin func() (*krbclient.Client, error)

// Reauthenticator is an Authenticator that may answer a 401 or 403 once:
// the Client asks it with a fresh copy of the request and the response.
// retry says whether to send req again; err, when not nil, explains the
// refusal better than the status.
type Reauthenticator interface {
	Authenticator
	Reauthenticate(req *http.Request, resp *http.Response) (retry bool, err error)
}

// SPNEGO authenticates to an Oozie behind Hadoop's Kerberos HTTP
// authentication: `Authorization: Negotiate <token>` with a service
// ticket for the Oozie's principal, then Oozie's hadoop.auth cookie for as
// long as Oozie accepts it. The http.Client must use Jar (HTTPClient gives
// one that does). It is safe for concurrent use; one serves every Oozie
// URL of a server, since the Kerberos principal is the same for all.
type SPNEGO struct {
	login KerberosLogin
	spn   string
	jar   http.CookieJar

	mu   sync.Mutex
	cur  *login
	spns map[string]string // by URL host
}

// login is one logged-in Kerberos client and the requests using it. A
// login replaced by a fresh one is destroyed (its TGT renewal goroutine
// stopped) once the last request using it is done: a long-running server
// that logs in again keeps one login, not one per refused ticket.
type login struct {
	cl      *krbclient.Client
	users   int
	retired bool
}

var _ Reauthenticator = (*SPNEGO)(nil)

// NewSPNEGO returns a SPNEGO authenticator that logs in with login. spn is
// the Oozie's service principal; "" means HTTP/<host>, the canonical name
// of the Oozie URL's host (its CNAME target; an IP address as it is), as
// Oozie's own client and curl --negotiate do. An spn may contain _HOST,
// replaced by that name, and may end in @REALM, which is dropped: the
// realm comes from krb5.conf's [domain_realm] as for any host.
func NewSPNEGO(login KerberosLogin, spn string) *SPNEGO {
	jar, _ := cookiejar.New(nil) // never fails without options
	if i := strings.LastIndex(spn, "@"); i >= 0 {
		spn = spn[:i]
	}
	return &SPNEGO{login: login, spn: spn, jar: jar, spns: make(map[string]string)}
}

// Jar is the cookie jar that keeps Oozie's hadoop.auth cookie.
func (a *SPNEGO) Jar() http.CookieJar { return a.jar }

// HTTPClient returns a copy of hc (nil: http.DefaultClient) that keeps
// cookies in Jar.
func (a *SPNEGO) HTTPClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	cp := *hc
	cp.Jar = a.jar
	return &cp
}

// Authenticate sends nothing when the jar holds a hadoop.auth cookie for
// the URL (the http.Client sends the cookie), else a SPNEGO token.
func (a *SPNEGO) Authenticate(req *http.Request) error {
	for _, c := range a.jar.Cookies(req.URL) {
		if c.Name == AuthCookie && strings.Trim(c.Value, `"`) != "" {
			return nil
		}
	}
	return a.negotiate(req)
}

// Reauthenticate answers Oozie's 401 to a request that carried only the
// cookie (it expired, or Oozie restarted with a new secret) with a SPNEGO
// token, once. A refused token is not retried, and the error says for
// which principal: a 401 Negotiate to a token, or the 403 with which
// hadoop-auth's filter (Oozie's own) answers a token it cannot accept,
// its status text the GSSException ("Checksum failed" for a ticket of
// another principal). A 403 with an oozie-error-code is Oozie's own
// answer, not the filter's.
func (a *SPNEGO) Reauthenticate(req *http.Request, resp *http.Response) (bool, error) {
	sentToken := resp.Request != nil && resp.Request.Header.Get("Authorization") != ""
	switch {
	case resp.StatusCode == http.StatusForbidden:
		if !sentToken || resp.Header.Get("oozie-error-code") != "" {
			return false, nil
		}
		return false, a.refused(req, statusText(resp))
	case !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Negotiate"):
		return false, nil
	case sentToken:
		return false, a.refused(req, "")
	}
	return true, a.negotiate(req)
}

// refused is the error of a SPNEGO token Oozie refused; why, when not
// empty, is the reason of hadoop-auth's filter, which also takes tickets
// only for HTTP/<the request's host> (unless its principal is *): a URL
// naming Oozie by another name (an IP address, an alias) has its tickets
// refused even for the right SPN.
func (a *SPNEGO) refused(req *http.Request, why string) error {
	spn, _ := a.spnFor(req.Context(), req.URL.Hostname())
	err := fmt.Errorf("Oozie refused the SPNEGO token: is %s the principal of Oozie's HTTP keytab (oozie.authentication.kerberos.principal)? Set the SPN if it is another", spn)
	if why != "" {
		err = fmt.Errorf("Oozie refused the SPNEGO token (%s): is %s the principal of Oozie's HTTP keytab (oozie.authentication.kerberos.principal)? Set the SPN if it is another; Oozie's filter takes tickets only for HTTP/<the Oozie URL's host>, here HTTP/%s, unless its principal is *", why, spn, strings.ToLower(req.URL.Hostname()))
	}
	return &KerberosError{SPN: spn, Principal: a.principal(), Err: err}
}

// statusText is the response's status line after the code (Jetty's
// carries the filter's reason: the GSSException), on one line and
// bounded.
func statusText(resp *http.Response) string {
	s := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)))
	if s == "" {
		s = http.StatusText(resp.StatusCode)
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// KerberosError is a SPNEGO authentication that failed: no login, no
// service ticket, or a ticket Oozie refused. It wraps
// external.ErrUnavailable (a slot waits until an operator renews the
// credentials; it does not fail).
type KerberosError struct {
	SPN       string
	Principal string // "" when the login failed
	Err       error
}

func (e *KerberosError) Error() string {
	who := e.Principal
	if who == "" {
		who = "(no login)"
	}
	return fmt.Sprintf("kerberos: SPNEGO for %s as %s: %v", e.SPN, who, e.Err)
}

// Unwrap returns the cause and external.ErrUnavailable.
func (e *KerberosError) Unwrap() []error { return []error{e.Err, external.ErrUnavailable} }

// negotiate sets the Authorization header, logging in again once when no
// ticket can be had with the current login.
func (a *SPNEGO) negotiate(req *http.Request) error {
	spn, err := a.spnFor(req.Context(), req.URL.Hostname())
	if err != nil {
		return &KerberosError{SPN: a.spn, Err: err}
	}
	var first error
	for fresh := range 2 {
		l, err := a.acquire(fresh == 1)
		if err != nil {
			// The principal of the login in use until now, if any: the
			// one whose ticket could not be renewed.
			return &KerberosError{SPN: spn, Principal: a.principal(), Err: fmt.Errorf("no login: %v", err)}
		}
		err = setToken(l.cl, req, spn)
		a.release(l)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return &KerberosError{SPN: spn, Principal: a.principal(), Err: fmt.Errorf("no service ticket: %s (%s)", oneLine(first), ticketHint(first, spn))}
}

// tokenTimes makes the authenticator of every SPNEGO token this process
// makes carry a distinct time. A Kerberos authenticator's time has
// microseconds, and a service's replay cache (gokrb5's; Java's before JDK
// 9) keys on the client and that time: two tokens made in the same
// microsecond by concurrent requests, the second refused with a 401 as a
// replay. MIT krb5 avoids it the same way (krb5_crypto_us_timeofday).
var tokenTimes struct {
	mu   sync.Mutex
	last time.Time // the microsecond at the end of the last token
}

// setToken is spnego.SetSPNEGOHeader with the authenticator made in a
// microsecond of its own: the service ticket is had (or read from the
// login's cache) first, outside the lock, so a slow KDC holds up no other
// request.
func setToken(cl *krbclient.Client, req *http.Request, spn string) error {
	if err := cl.AffirmLogin(); err != nil {
		return fmt.Errorf("could not acquire client credential: %v", err)
	}
	tkt, key, err := cl.GetServiceTicket(spn)
	if err != nil {
		return fmt.Errorf("could not initialize context: %v", err)
	}
	tokenTimes.mu.Lock()
	for time.Now().Truncate(time.Microsecond).Equal(tokenTimes.last) {
		runtime.Gosched()
	}
	neg, err := spnego.NewNegTokenInitKRB5(cl, tkt, key)
	tokenTimes.last = time.Now().Truncate(time.Microsecond)
	tokenTimes.mu.Unlock()
	if err != nil {
		return fmt.Errorf("could not initialize context: could not create NegTokenInit: %v", err)
	}
	tok := spnego.SPNEGOToken{Init: true, NegTokenInit: neg}
	b, err := tok.Marshal()
	if err != nil {
		return fmt.Errorf("could not marshal SPNEGO token: %v", err)
	}
	req.Header.Set(spnego.HTTPHeaderAuthRequest, "Negotiate "+base64.StdEncoding.EncodeToString(b))
	return nil
}

// ticketHint says what to do about a service ticket gokrb5 could not get.
func ticketHint(err error, spn string) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "KDC_ERR_S_PRINCIPAL_UNKNOWN"):
		return "the KDC does not know " + spn + ": set the SPN to Oozie's HTTP principal"
	case strings.Contains(msg, "no user credentials available"):
		return "the credential cache's ticket has expired: run kinit, or log in with a keytab"
	}
	return "run kinit if the credential cache expired; check that " + spn + " exists in the KDC, or set the SPN"
}

// acquire returns the current login for a request, logging in (again)
// when there is none or fresh is set; release it when done. A failed
// login keeps the current one.
func (a *SPNEGO) acquire(fresh bool) (*login, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur != nil && !fresh {
		a.cur.users++
		return a.cur, nil
	}
	cl, err := a.login()
	if err != nil {
		return nil, err
	}
	// The old login is destroyed once no request in flight uses it.
	if old := a.cur; old != nil {
		old.retired = true
		if old.users == 0 {
			old.cl.Destroy()
		}
	}
	a.cur = &login{cl: cl, users: 1}
	return a.cur, nil
}

// release ends a request's use of l, destroying l if it was replaced and
// this was its last request.
func (a *SPNEGO) release(l *login) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l.users--
	if l.retired && l.users == 0 {
		l.cl.Destroy()
	}
}

// User is the short name of the logged-in principal (alice for
// alice@REALM, celos for celos/host@REALM), as Hadoop's default
// auth_to_local rule maps it: the user the Oozie at oozieURL runs the
// jobs as. It logs in if no request has yet.
func (a *SPNEGO) User(ctx context.Context, oozieURL string) (string, error) {
	l, err := a.acquire(false)
	if err != nil {
		spn := a.spn
		if u, perr := url.Parse(oozieURL); perr == nil {
			spn, _ = a.spnFor(ctx, u.Hostname())
		}
		return "", &KerberosError{SPN: spn, Principal: a.principal(), Err: fmt.Errorf("no login: %v", err)}
	}
	a.release(l)
	p := a.principal()
	if i := strings.IndexAny(p, "/@"); i >= 0 {
		p = p[:i]
	}
	return p, nil
}

func (a *SPNEGO) principal() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur == nil || a.cur.cl.Credentials == nil {
		return ""
	}
	cr := a.cur.cl.Credentials
	return cr.CName().PrincipalNameString() + "@" + cr.Realm()
}

// spnFor is the SPN for an Oozie host: the configured one (with _HOST
// replaced), else HTTP/<canonical host>.
func (a *SPNEGO) spnFor(ctx context.Context, host string) (string, error) {
	if a.spn != "" && !strings.Contains(a.spn, "_HOST") {
		return a.spn, nil
	}
	a.mu.Lock()
	spn, ok := a.spns[host]
	a.mu.Unlock()
	if ok {
		return spn, nil
	}
	canon := canonicalHost(ctx, host)
	if a.spn != "" {
		spn = strings.ReplaceAll(a.spn, "_HOST", canon)
	} else {
		spn = "HTTP/" + canon
	}
	a.mu.Lock()
	a.spns[host] = spn
	a.mu.Unlock()
	return spn, nil
}

// canonicalHost is the CNAME target of host, lower case without the
// final dot; host itself when it is an IP address or the lookup fails
// (within 5 s).
func canonicalHost(ctx context.Context, host string) string {
	if net.ParseIP(host) != nil {
		return host
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if name, err := net.DefaultResolver.LookupCNAME(ctx, host); err == nil && name != "" {
		host = name
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// oneLine keeps gokrb5's multi-part messages on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// WithSPNEGO makes the service authenticate with a (under Kerberos the
// principal is the user, so user.name is not sent) and keep Oozie's
// hadoop.auth cookie in a's jar.
func WithSPNEGO(a *SPNEGO) ServiceOption {
	return func(s *Service) {
		s.auth = func(string) Authenticator { return a }
		s.spnego = a
		s.hc = a.HTTPClient(s.hc)
	}
}

// HadoopAuth returns how the service authenticates under a Hadoop
// configuration: WithSPNEGO, logging in as the HDFS client does
// (hadoopconf.KerberosClient with login: a keytab and principal, else the
// credential cache), when hadoop.security.authentication is kerberos; no
// options (Oozie's simple authentication) otherwise or for a nil conf.
// spn is NewSPNEGO's.
func HadoopAuth(conf hadoopconf.Conf, login hadoopconf.Options, spn string) []ServiceOption {
	if !conf.Kerberos() {
		return nil
	}
	return []ServiceOption{WithSPNEGO(NewSPNEGO(func() (*krbclient.Client, error) { return hadoopconf.KerberosClient(login) }, spn))}
}

// HadoopClientOptions is HadoopAuth for a lone Client (a ping of the
// Oozie before a run): WithAuth and WithHTTPClient with a SPNEGO of its
// own under Kerberos, nothing otherwise.
func HadoopClientOptions(conf hadoopconf.Conf, login hadoopconf.Options, spn string) []Option {
	if !conf.Kerberos() {
		return nil
	}
	a := NewSPNEGO(func() (*krbclient.Client, error) { return hadoopconf.KerberosClient(login) }, spn)
	return []Option{WithAuth(a), WithHTTPClient(a.HTTPClient(nil))}
}

// LoadHadoopAuth is HadoopAuth over the configuration in confDir (""
// means $HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop; when none is set,
// simple authentication).
func LoadHadoopAuth(confDir string, login hadoopconf.Options, spn string) ([]ServiceOption, error) {
	if confDir == "" {
		confDir = hadoopconf.Dir()
	}
	if confDir == "" {
		return nil, nil
	}
	conf, err := hadoopconf.Load(confDir)
	if err != nil {
		return nil, fmt.Errorf("oozie authentication: hadoop configuration: %w", err)
	}
	return HadoopAuth(conf, login, spn), nil
}
