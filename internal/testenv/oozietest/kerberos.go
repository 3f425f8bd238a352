package oozietest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/kdctest"
)

// Kerberos configures Oozie's own HTTP authentication under Kerberos, as
// on a secured cluster: Oozie's AuthFilter (hadoop-auth's
// AuthenticationFilter) with hadoop-auth's KerberosAuthenticationHandler,
// which asks every REST request for SPNEGO and then sets a hadoop.auth
// cookie. HDFS stays with simple authentication: Oozie's access to the
// mini cluster is unchanged.
type Kerberos struct {
	// Config is the krb5.conf the JVM reads (java.security.krb5.conf):
	// the realm's, kdctest.KDC.Config.
	Config string
	// Principal is Oozie's HTTP principal, HTTP/<host>@REALM. hadoop-auth
	// accepts a ticket only for HTTP/<the request's host name>, so the
	// server's URL uses <host>, which must resolve to 127.0.0.1
	// (localhost).
	Principal string
	// Keytab holds Principal's keys. One that does not is not found at
	// start (Java reads an acceptor's keytab only for a token): Oozie
	// starts and refuses every token with a 403 GSSException.
	Keytab string
}

// host is the host part of Principal.
func (k *Kerberos) host() (string, error) {
	p, _, _ := strings.Cut(k.Principal, "@")
	svc, host, ok := strings.Cut(p, "/")
	if !ok || svc != "HTTP" || host == "" {
		return "", fmt.Errorf("oozietest: Kerberos.Principal %q is not HTTP/<host>@REALM", k.Principal)
	}
	return host, nil
}

// url is the server's base URL under Kerberos.
func (k *Kerberos) url(port int) string {
	host, _ := k.host() // checked by jvmArgs
	return fmt.Sprintf("http://%s:%d/oozie", host, port)
}

// jvmArgs inserts the JVM options Kerberos needs before the classpath of
// args (Paths'): the realm's krb5.conf, and access to the JDK's internal
// Kerberos classes, which hadoop-auth 2.6 reads by reflection: the
// default realm (sun.security.krb5.Config; without it KerberosName knows
// no realm, maps no principal to a user and every token gets a 500 "No
// rules applied to root@CELOS.TEST") and the mechanism OIDs
// (sun.security.jgss.GSSUtil; without it every token gets a 403 naming an
// IllegalAccessException).
func (k *Kerberos) jvmArgs(args []string) ([]string, error) {
	if k.Config == "" || k.Keytab == "" {
		return nil, errors.New("oozietest: Kerberos needs Config and Keytab")
	}
	if _, err := k.host(); err != nil {
		return nil, err
	}
	i := slices.Index(args, "-cp")
	if i < 0 {
		return nil, fmt.Errorf("oozietest: no -cp in the java command %q", args)
	}
	opts := []string{
		"-Djava.security.krb5.conf=" + k.Config,
		"--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
		"--add-exports=java.security.jgss/sun.security.jgss=ALL-UNNAMED",
	}
	return slices.Concat(args[:i], opts, args[i:]), nil
}

// site adds the authentication properties to conf (which may override
// them) for oozie-site.xml.
func (k *Kerberos) site(conf map[string]string) map[string]string {
	out := map[string]string{
		"oozie.authentication.type":                     "kerberos",
		"oozie.authentication.kerberos.principal":       k.Principal,
		"oozie.authentication.kerberos.keytab":          k.Keytab,
		"oozie.authentication.kerberos.name.rules":      "DEFAULT",
		"oozie.authentication.simple.anonymous.allowed": "false",
	}
	for key, v := range conf {
		out[key] = v
	}
	return out
}

// waitNegotiate asks GET /versions without credentials until Oozie's
// filter answers 401 with WWW-Authenticate: Negotiate. Any other answer
// fails at once: the JVM said READY, so the filter is in place or failed
// to start (Jetty then answers 503 to everything).
func waitNegotiate(ctx context.Context, base string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/versions", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Negotiate") {
				return nil
			}
			return fmt.Errorf("GET %s/versions without credentials: %s (WWW-Authenticate %q) %s, want 401 Negotiate from Oozie's Kerberos filter",
				base, resp.Status, resp.Header.Get("WWW-Authenticate"), b)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Oozie does not answer: %v (%w)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// KerberosEnv is an Oozie under Kerberos, the realm it belongs to and the
// mini cluster it runs over.
type KerberosEnv struct {
	Env
	// KDC is the realm's KDC (kdctest.Realm); point KRB5_CONFIG at
	// KDC.Config.
	KDC *kdctest.KDC
	// HTTP is Oozie's principal, HTTP/localhost@REALM.
	HTTP kdctest.Principal
	// User is <HDFS user>@REALM: Oozie maps it to the HDFS user (the
	// DEFAULT auth_to_local rule), who may act on the mini cluster.
	User kdctest.Principal
}

var sharedKrb struct {
	once sync.Once
	env  KerberosEnv
	err  error
}

// SharedKerberos returns the test binary's one Oozie under Kerberos (its
// URL is http://localhost:PORT/oozie), with a KDC of its own, over the
// mini cluster of Shared; all are started on first use and stopped by
// Main. It fails the test when they cannot start (every later caller too),
// or skips it when the developer opted out of Oozie or Kerberos (not in
// CI).
func SharedKerberos(t testing.TB) KerberosEnv {
	t.Helper()
	SkipIfOptedOut(t)
	kdctest.SkipIfOptedOut(t)
	env := Shared(t)
	sharedKrb.once.Do(func() {
		sharedKrb.env, sharedKrb.err = startKerberos(context.Background(), env)
	})
	if sharedKrb.err != nil {
		t.Fatal(sharedKrb.err)
	}
	return sharedKrb.env
}

func startKerberos(ctx context.Context, env Env) (KerberosEnv, error) {
	kdc, err := kdctest.Start(ctx, "")
	if err != nil {
		return KerberosEnv{}, err
	}
	ke := KerberosEnv{KDC: kdc}
	if ke.HTTP, err = kdc.AddPrincipal(ctx, "HTTP/localhost"); err == nil {
		ke.User, err = kdc.AddPrincipal(ctx, env.HDFS.User())
	}
	if err != nil {
		kdc.Close()
		return KerberosEnv{}, err
	}
	o, err := Start(ctx, Options{HDFS: env.HDFS, Kerberos: &Kerberos{Config: kdc.Config, Principal: ke.HTTP.Name, Keytab: ke.HTTP.Keytab}})
	if err != nil {
		kdc.Close()
		return KerberosEnv{}, err
	}
	ke.Env = Env{HDFS: env.HDFS, Oozie: o}
	return ke, nil
}

// stopKerberos stops SharedKerberos's Oozie and KDC, if it started them.
func stopKerberos() {
	if e := sharedKrb.env; e.Oozie != nil {
		e.Oozie.Stop()
		e.KDC.Close()
	}
}
