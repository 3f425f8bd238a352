package oozie_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jcmturner/goidentity/v6"
	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/service"
	"github.com/jcmturner/gokrb5/v8/spnego"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/kdctest"
	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/sandbox"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// kerberizedOozie is the Oozie fake behind what Hadoop's
// AuthenticationFilter does for Oozie under Kerberos: gokrb5's
// service-side SPNEGO with the HTTP/localhost keytab of a real KDC, a
// hadoop.auth cookie after a successful negotiation, and requests with a
// cookie it issued let through without a new token.
type kerberizedOozie struct {
	URL  string            // http://localhost:<port>/oozie
	fake *ooziefake.Server // nil in front of the real Oozie

	mu           sync.Mutex
	negotiations int      // requests authenticated by a SPNEGO token
	cookieHits   int      // requests let through by their cookie
	principals   []string // of the negotiations
	cookies      map[string]bool
}

func startKerberizedOozie(t *testing.T, httpKeytab string) *kerberizedOozie {
	t.Helper()
	f := startFake(t)
	k := startKerberizedProxy(t, httpKeytab, f.URL, "")
	k.fake = f
	return k
}

// startKerberizedProxy puts the Kerberos protection in front of the Oozie
// at backend (http://host:port/oozie). With asUser, the requests it lets
// through carry ?user.name=asUser, as Oozie sees the authenticated user of
// its AuthenticationFilter (the principal mapped by auth_to_local) when it
// runs with simple authentication behind it.
func startKerberizedProxy(t *testing.T, httpKeytab, backend, asUser string) *kerberizedOozie {
	t.Helper()
	kt, err := keytab.Load(httpKeytab)
	if err != nil {
		t.Fatal(err)
	}
	k := &kerberizedOozie{cookies: make(map[string]bool)}
	bu, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: bu.Scheme, Host: bu.Host})
	// The real Oozie behind sets a hadoop.auth cookie of its own (simple
	// authentication): only the protection's may reach the client, as with
	// Oozie's one filter.
	proxy.ModifyResponse = func(resp *http.Response) error {
		resp.Header.Del("Set-Cookie")
		return nil
	}
	if asUser != "" {
		direct := proxy.Director
		proxy.Director = func(r *http.Request) {
			direct(r)
			q := r.URL.Query()
			q.Set("user.name", asUser)
			r.URL.RawQuery = q.Encode()
		}
	}
	negotiated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := goidentity.FromHTTPRequestContext(r)
		var b [16]byte
		_, _ = rand.Read(b[:])
		token := hex.EncodeToString(b[:])
		k.mu.Lock()
		k.negotiations++
		if id != nil {
			k.principals = append(k.principals, id.UserName()+"@"+id.Domain())
		}
		k.cookies[token] = true
		k.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: oozie.AuthCookie, Value: token, Path: "/", HttpOnly: true})
		proxy.ServeHTTP(w, r)
	})
	guarded := spnego.SPNEGOKRB5Authenticate(negotiated, kt, service.DecodePAC(false), service.Logger(log.New(io.Discard, "", 0)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(oozie.AuthCookie); err == nil {
			k.mu.Lock()
			ok := k.cookies[c.Value]
			if ok {
				k.cookieHits++
			}
			k.mu.Unlock()
			if ok {
				proxy.ServeHTTP(w, r)
				return
			}
		}
		guarded.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	k.URL = "http://localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + bu.Path
	return k
}

// forgetCookies makes the server refuse every cookie it issued, as
// Oozie does after they expire or it restarts with a new secret.
func (k *kerberizedOozie) forgetCookies() {
	k.mu.Lock()
	k.cookies = make(map[string]bool)
	k.mu.Unlock()
}

type authCounts struct {
	Negotiations, CookieHits int
	Principals               []string
}

func (k *kerberizedOozie) counts() authCounts {
	k.mu.Lock()
	defer k.mu.Unlock()
	return authCounts{k.negotiations, k.cookieHits, append([]string(nil), k.principals...)}
}

// realm is a KDC with a user alice and Oozie's HTTP/localhost principal,
// and the environment pointing at its krb5.conf.
type realm struct {
	kdc         *kdctest.KDC
	alice, http kdctest.Principal
}

func newRealm(t *testing.T) realm {
	kdc := kdctest.StartT(t)
	r := realm{kdc: kdc, alice: kdc.AddPrincipalT(t, "alice"), http: kdc.AddPrincipalT(t, "HTTP/localhost")}
	t.Setenv("KRB5_CONFIG", kdc.Config)
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-such-cache"))
	return r
}

func keytabLogin(p kdctest.Principal) oozie.KerberosLogin {
	return func() (*krbclient.Client, error) {
		return hadoopconf.KerberosClient(hadoopconf.Options{Keytab: p.Keytab, Principal: p.Name})
	}
}

func cacheLogin() oozie.KerberosLogin {
	return func() (*krbclient.Client, error) { return hadoopconf.KerberosClient(hadoopconf.Options{}) }
}

func spnegoClient(t *testing.T, url string, a *oozie.SPNEGO) *oozie.Client {
	return newClient(t, url, oozie.WithAuth(a), oozie.WithHTTPClient(a.HTTPClient(nil)), oozie.WithTimeout(time.Minute))
}

// submitAndInfo submits a job and reads it back: the calls a slot makes.
func submitAndInfo(t *testing.T, c *oozie.Client) error {
	t.Helper()
	id, err := c.Submit(t.Context(), wfConf)
	if err != nil {
		return err
	}
	j, err := c.JobInfo(t.Context(), id)
	if err != nil {
		return err
	}
	if j.ID != id {
		t.Fatalf("job info of %s is %s", id, j.ID)
	}
	return nil
}

func TestSPNEGOWithKeytab(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	a := oozie.NewSPNEGO(keytabLogin(r.alice), "")
	c := spnegoClient(t, o.URL, a)
	if err := submitAndInfo(t, c); err != nil {
		t.Fatal(err)
	}
	// One negotiation (versions), then the cookie: submit and info.
	want := authCounts{Negotiations: 1, CookieHits: 2, Principals: []string{r.alice.Name}}
	if diff := cmp.Diff(want, o.counts()); diff != "" {
		t.Fatalf("authentication (-want +got):\n%s", diff)
	}
	// Under Kerberos the principal is the user: no user.name.
	for _, req := range o.fake.Requests() {
		if strings.Contains(req.RawQuery, "user.name=") {
			t.Errorf("%s %s?%s sends user.name under Kerberos", req.Method, req.Path, req.RawQuery)
		}
	}
}

func TestSPNEGOWithCredentialCache(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	t.Setenv("KRB5CCNAME", "FILE:"+r.kdc.KinitT(t, r.alice, ""))
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(cacheLogin(), ""))
	if err := submitAndInfo(t, c); err != nil {
		t.Fatal(err)
	}
	if got := o.counts(); got.Negotiations != 1 || !cmp.Equal(got.Principals, []string{r.alice.Name}) {
		t.Fatalf("authentication: %+v, want one negotiation as %s", got, r.alice.Name)
	}
}

// TestSPNEGOCookieExpired: a cookie Oozie no longer accepts is answered
// by a new negotiation, once, within the same call.
func TestSPNEGOCookieExpired(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	if err := submitAndInfo(t, c); err != nil {
		t.Fatal(err)
	}
	o.forgetCookies()
	if err := submitAndInfo(t, c); err != nil {
		t.Fatalf("after the cookie expired: %v", err)
	}
	want := authCounts{Negotiations: 2, CookieHits: 3, Principals: []string{r.alice.Name, r.alice.Name}}
	if diff := cmp.Diff(want, o.counts()); diff != "" {
		t.Fatalf("authentication (-want +got):\n%s", diff)
	}
}

// checkKerberosError checks err names the Oozie URL, the SPN and each of
// more, and is a KerberosError that wraps external.ErrUnavailable (the
// slot waits for an operator, it does not fail).
func checkKerberosError(t *testing.T, err error, url, spn string, more ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	t.Log(err)
	var ke *oozie.KerberosError
	if !errors.As(err, &ke) || !errors.Is(err, external.ErrUnavailable) {
		t.Errorf("%v: not a KerberosError wrapping ErrUnavailable", err)
	}
	for _, s := range append([]string{url, spn}, more...) {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not name %q: %v", s, err)
		}
	}
}

func TestSPNEGONoCredentials(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(cacheLogin(), ""))
	_, err := c.Submit(t.Context(), wfConf)
	checkKerberosError(t, err, o.URL, "HTTP/localhost", "no-such-cache", "run kinit")
	if n := len(o.fake.Requests()); n != 0 {
		t.Errorf("%d requests reached Oozie without credentials", n)
	}
	// kinit, and the next call works without a restart.
	t.Setenv("KRB5CCNAME", r.kdc.KinitT(t, r.alice, ""))
	if err := submitAndInfo(t, c); err != nil {
		t.Fatalf("after kinit: %v", err)
	}
}

// TestSPNEGOExpiredCache: a credential cache whose TGT has expired gives
// a clear error naming the principal, and a renewed cache is read afresh.
func TestSPNEGOExpiredCache(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	cc := r.kdc.KinitT(t, r.alice, "2s")
	t.Setenv("KRB5CCNAME", cc)
	waitExpired(t, cc)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(cacheLogin(), ""))
	_, err := c.Submit(t.Context(), wfConf)
	checkKerberosError(t, err, o.URL, "HTTP/localhost", r.alice.Name, "has expired: run kinit")
	t.Setenv("KRB5CCNAME", r.kdc.KinitT(t, r.alice, ""))
	if err := submitAndInfo(t, c); err != nil {
		t.Fatalf("after kinit: %v", err)
	}
}

// waitExpired polls until the TGT in the cache has expired.
func waitExpired(t *testing.T, path string) {
	t.Helper()
	cc, err := credentials.LoadCCache(path)
	if err != nil {
		t.Fatal(err)
	}
	var end time.Time
	for _, c := range cc.GetEntries() {
		if c.EndTime.After(end) {
			end = c.EndTime
		}
	}
	if end.IsZero() || time.Until(end) > time.Minute {
		t.Fatalf("the cache's tickets end at %v, want a short lifetime", end)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(end.Add(time.Second)); {
		if time.Now().After(deadline) {
			t.Fatal("the ticket never expired")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSPNEGOUnknownSPN(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), "HTTP/no-such-host@"+kdctest.Realm))
	_, err := c.Submit(t.Context(), wfConf)
	checkKerberosError(t, err, o.URL, "HTTP/no-such-host", r.alice.Name, "the KDC does not know HTTP/no-such-host")
}

// TestSPNEGOWrongSPN: a ticket for a principal the KDC knows but Oozie's
// keytab does not hold is refused by Oozie; the error says which SPN was
// used, and there is no second try.
func TestSPNEGOWrongSPN(t *testing.T) {
	r := newRealm(t)
	r.kdc.AddPrincipalT(t, "HTTP/other")
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), "HTTP/other"))
	_, err := c.Versions(t.Context())
	checkKerberosError(t, err, o.URL, "HTTP/other", r.alice.Name, "refused", "HTTP 401")
	if got := o.counts(); got.Negotiations != 0 {
		t.Errorf("negotiations %d with a wrong SPN", got.Negotiations)
	}
}

// TestSPNEGOKDCDown: with the KDC stopped the call fails in bounded
// time with the login's error; it does not hang.
func TestSPNEGOKDCDown(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	r.kdc.Stop()
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	_, err := c.Submit(t.Context(), wfConf)
	checkKerberosError(t, err, o.URL, "HTTP/localhost", "no login", "login as "+r.alice.Name)
}

// TestSPNEGO_HOST: _HOST in the SPN is the Oozie URL's host.
func TestSPNEGO_HOST(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), "HTTP/_HOST@"+kdctest.Realm))
	if _, err := c.Versions(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestHadoopAuthService: the service the server builds from a Hadoop
// configuration with hadoop.security.authentication=kerberos submits and
// reads a slot's job through SPNEGO with the credential cache.
func TestHadoopAuthService(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	t.Setenv("KRB5CCNAME", r.kdc.KinitT(t, r.alice, ""))
	dir := t.TempDir()
	writeCoreSite(t, dir, "kerberos")
	opts, err := oozie.LoadHadoopAuth(dir, hadoopconf.Options{}, "")
	if err != nil {
		t.Fatal(err)
	}
	s := oozie.NewService(&defaults.Defaults{Oozie: o.URL}, nil, opts...)
	w := newWorkflow("", map[string]string{"user.name": "celos", "oozie.wf.application.path": "hdfs://nn/app"})
	id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 2, 7, 0, 0, 0, time.UTC)}
	jobID, err := s.Submit(t.Context(), w, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Status(t.Context(), w, jobID); err != nil {
		t.Fatal(err)
	}
	// The workflow names no user: the principal's short name is sent.
	w2 := newWorkflow("", map[string]string{"oozie.wf.application.path": "hdfs://nn/app"})
	jobID2, err := s.Submit(t.Context(), w2, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []string{jobID, jobID2} {
		job, _ := o.fake.Job(j)
		if want := map[string]string{jobID: "celos", jobID2: "alice"}[j]; job.Conf["user.name"] != want {
			t.Errorf("job %s: user.name %q, want %q", j, job.Conf["user.name"], want)
		}
	}
	if got := o.counts(); got.Negotiations != 1 || got.CookieHits < 2 {
		t.Fatalf("authentication %+v: want one negotiation, then the cookie", got)
	}
}

// TestHadoopAuthSimple: without Kerberos in the Hadoop configuration (or
// without one) requests are as before: user.name, no Authorization, no
// cookie jar.
func TestHadoopAuthSimple(t *testing.T) {
	dir := t.TempDir()
	writeCoreSite(t, dir, "simple")
	for name, confDir := range map[string]string{"simple": dir, "none": ""} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("HADOOP_CONF_DIR", "")
			t.Setenv("HADOOP_HOME", "")
			opts, err := oozie.LoadHadoopAuth(confDir, hadoopconf.Options{}, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(opts) != 0 {
				t.Fatalf("%d options under simple authentication", len(opts))
			}
			var headers []string
			f := startFake(t)
			hc := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
				headers = append(headers, req.Header.Get("Authorization")+req.Header.Get("Cookie"))
				return http.DefaultTransport.RoundTrip(req)
			})}
			s := oozie.NewService(&defaults.Defaults{Oozie: f.URL}, hc, opts...)
			w := newWorkflow("", map[string]string{"user.name": "celos", "oozie.wf.application.path": "hdfs://nn/app"})
			if _, err := s.Submit(t.Context(), w, slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 2, 7, 0, 0, 0, time.UTC)}); err != nil {
				t.Fatal(err)
			}
			for _, req := range f.Requests() {
				if !strings.Contains(req.RawQuery, "user.name=celos") {
					t.Errorf("%s %s?%s: no user.name=celos", req.Method, req.Path, req.RawQuery)
				}
			}
			if diff := cmp.Diff([]string{"", ""}, headers); diff != "" {
				t.Errorf("Authorization and Cookie headers (-want +got):\n%s", diff)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func writeCoreSite(t *testing.T, dir, auth string) {
	t.Helper()
	xml := `<configuration><property><name>hadoop.security.authentication</name><value>` + auth + `</value></property></configuration>`
	if err := os.WriteFile(filepath.Join(dir, "core-site.xml"), []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSandboxTargetKerberos: `celos test --target` with a target whose
// Hadoop configuration says Kerberos pings the Oozie and submits through
// SPNEGO; without it the ping says Oozie wants Kerberos.
func TestSandboxTargetKerberos(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	t.Setenv("KRB5CCNAME", r.kdc.KinitT(t, r.alice, ""))
	in := &sandbox.Installation{
		Source:   "file:///target.json",
		Conf:     hadoopconf.Conf{"fs.defaultFS": "file:///", "hadoop.security.authentication": "kerberos"},
		Defaults: &defaults.Defaults{Oozie: o.URL},
	}
	w := fixture.Hourly("krb")
	w.ExternalService = fixture.Oozie(map[string]string{"oozie.wf.application.path": "hdfs://nn/app"})
	p := fixture.Project("p", w)
	err := sandbox.CheckOozie(t.Context(), in.Defaults, p)
	if err == nil || !strings.Contains(err.Error(), "Oozie wants Kerberos/SPNEGO authentication") {
		t.Fatalf("ping without SPNEGO: %v", err)
	}
	if err := sandbox.CheckOozie(t.Context(), in.Defaults, p, oozie.HadoopClientOptions(in.Conf, hadoopconf.Options{}, "")...); err != nil {
		t.Fatalf("ping with SPNEGO: %v", err)
	}
	env, closeEnv, err := sandbox.TargetEnv(t.Context(), in, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeEnv()
	id := slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 2, 7, 0, 0, 0, time.UTC)}
	if _, err := env.Services["oozie"].Submit(t.Context(), &w, id); err != nil {
		t.Fatalf("submit in the sandbox: %v", err)
	}
	if got := o.counts(); !cmp.Equal(got.Principals, []string{r.alice.Name, r.alice.Name}) {
		t.Fatalf("negotiations %v: want one by the ping and one by the sandbox's service, as %s", got.Principals, r.alice.Name)
	}
}

// TestSPNEGOConcurrent: calls from many slots at once, before and after
// the cookie, and across an expired cookie, all succeed (run with -race).
func TestSPNEGOConcurrent(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	for round := range 2 {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Submit(t.Context(), wfConf); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		o.forgetCookies()
	}
	if n := len(o.fake.Jobs()); n != 16 {
		t.Fatalf("%d jobs, want 16", n)
	}
}

// TestSPNEGORealOozie: the real Oozie (oozietest) behind the Kerberos
// protection runs a job submitted and followed with SPNEGO.
func TestSPNEGORealOozie(t *testing.T) {
	b := realBackend(t)
	r := newRealm(t)
	o := startKerberizedProxy(t, r.http.Keytab, b.url, b.user)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	conf := b.conf(b.touchApp, "krb@2015-09-02T07:00Z")
	delete(conf, "user.name") // Oozie takes the authenticated user
	id, err := c.Submit(t.Context(), conf)
	if err != nil {
		t.Fatal(err)
	}
	j := waitFinal(t, c, id)
	if j.Status != oozie.StatusSucceeded || j.User != b.user {
		t.Fatalf("job %s: %s as %q, want SUCCEEDED as %q", id, j.Status, j.User, b.user)
	}
	if got := o.counts(); got.Negotiations != 1 || got.CookieHits < 2 {
		t.Fatalf("authentication %+v: want one negotiation, then the cookie", got)
	}
}

// TestSPNEGOKDCSilent: a KDC that accepts connections and never answers
// gives an error within gokrb5's network timeouts (5 s per exchange), not
// a hang.
func TestSPNEGOKDCSilent(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	conf, err := os.ReadFile(r.kdc.Config)
	if err != nil {
		t.Fatal(err)
	}
	silent := filepath.Join(t.TempDir(), "krb5.conf")
	data := strings.ReplaceAll(string(conf), "127.0.0.1:"+strconv.Itoa(r.kdc.Port), ln.Addr().String())
	if err := os.WriteFile(silent, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KRB5_CONFIG", silent)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	done := make(chan error, 1)
	go func() {
		_, err := c.Versions(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		checkKerberosError(t, err, o.URL, "HTTP/localhost", "no login", "login as "+r.alice.Name)
	case <-time.After(2 * time.Minute):
		t.Fatal("no answer 2 minutes into a call to a silent KDC")
	}
}

// TestSPNEGOSubmitWithoutTicketHasNoEffect: a submission that cannot get
// a Kerberos ticket fails before any request (external.ErrNoEffect), so
// the engine forgets its submit intent and submits at once when a ticket
// is there, instead of waiting out the in-flight time of a request that
// never left (TestRecoverInFlight).
func TestSPNEGOSubmitWithoutTicketHasNoEffect(t *testing.T) {
	r := newRealm(t) // KRB5CCNAME names no cache
	o := startKerberizedOozie(t, r.http.Keytab)
	conf := t.TempDir()
	writeCoreSite(t, conf, "kerberos")
	opts, err := oozie.LoadHadoopAuth(conf, hadoopconf.Options{}, "")
	if err != nil {
		t.Fatal(err)
	}
	s := oozie.NewService(&defaults.Defaults{Oozie: o.URL}, nil, opts...)
	w := newWorkflow("", map[string]string{"oozie.wf.application.path": "/app"})
	_, err = s.Submit(t.Context(), w, slot.ID{Workflow: w.ID, Time: time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)})
	if !errors.Is(err, external.ErrUnavailable) || !errors.Is(err, external.ErrNoEffect) {
		t.Fatalf("submit without a ticket: %v; want unavailable and no effect", err)
	}
}

// TestSPNEGOTokensAreNotReplays: tokens made at once by several goroutines
// carry distinct authenticator times, so a service whose replay cache
// keys on the client and the time (gokrb5's, and Java's before JDK 9)
// accepts every one. Two tokens made in the same microsecond were refused
// as a replay: a 401 to one of many concurrent submissions
// (TestSPNEGOConcurrent failed that way in CI).
func TestSPNEGOTokensAreNotReplays(t *testing.T) {
	r := newRealm(t)
	kt, err := keytab.Load(r.http.Keytab)
	if err != nil {
		t.Fatal(err)
	}
	a := oozie.NewSPNEGO(keytabLogin(r.alice), "")
	const workers, each = 4, 500
	headers := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				req, _ := http.NewRequest(http.MethodGet, "http://localhost/oozie/versions", nil)
				if err := a.Authenticate(req); err != nil {
					t.Error(err)
					return
				}
				headers[w] = append(headers[w], req.Header.Get("Authorization"))
			}
		}()
	}
	wg.Wait()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	guarded := spnego.SPNEGOKRB5Authenticate(ok, kt, service.DecodePAC(false), service.Logger(log.New(io.Discard, "", 0)))
	refused := 0
	for _, hs := range headers {
		for _, h := range hs {
			req := httptest.NewRequest(http.MethodGet, "http://localhost/oozie/versions", nil)
			req.Header.Set("Authorization", h)
			rec := httptest.NewRecorder()
			guarded.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				refused++
			}
		}
	}
	if refused > 0 {
		t.Fatalf("%d of %d tokens made at once refused (replays)", refused, workers*each)
	}
}
