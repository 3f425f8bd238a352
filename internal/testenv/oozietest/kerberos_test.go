package oozietest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/spnego"

	"github.com/celos-go/celos/internal/testenv/kdctest"
	"github.com/celos-go/celos/internal/testenv/oozietest"
)

// TestKerberos: SharedKerberos's Oozie refuses a request without
// credentials with Oozie's own filter's 401 Negotiate, and answers one
// with a SPNEGO token for HTTP/localhost (gokrb5's client, a keytab login
// of the HDFS user's principal) as that user, with a hadoop.auth cookie
// that works alone afterwards.
func TestKerberos(t *testing.T) {
	env := oozietest.SharedKerberos(t)
	base := env.Oozie.URL()
	if !strings.HasPrefix(base, "http://localhost:") {
		t.Fatalf("URL %s, want http://localhost:PORT/oozie (the HTTP principal's host)", base)
	}
	resp, err := http.Get(base + "/v1/admin/status?user.name=" + env.HDFS.User())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Negotiate" {
		t.Fatalf("without credentials (user.name alone): %s, WWW-Authenticate %q; want 401 Negotiate", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}

	resp, body := spnegoGet(t, env, base+"/v2/jobs?jobtype=wf")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with a SPNEGO token: %s %s", resp.Status, body)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "hadoop.auth" {
			cookie = c
		}
	}
	if cookie == nil || !strings.Contains(cookie.Value, "u="+env.HDFS.User()+"&p="+env.User.Name+"&t=kerberos") {
		t.Fatalf("hadoop.auth cookie %v, want one for u=%s&p=%s&t=kerberos", cookie, env.HDFS.User(), env.User.Name)
	}

	// The cookie alone: Oozie's admin status, as the authenticated user.
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/admin/status", nil)
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var status struct{ SystemMode string }
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil || resp.StatusCode != http.StatusOK || status.SystemMode != "NORMAL" {
		t.Fatalf("with the cookie alone: %s, %+v, %v", resp.Status, status, err)
	}
}

// TestKerberosBadConfig: a principal that is not HTTP/<host> is refused
// before the JVM starts. A keytab without Oozie's principal is not found
// at start: the filter refuses every token, with a 403 naming the
// GSSException.
func TestKerberosBadConfig(t *testing.T) {
	env := oozietest.SharedKerberos(t)
	t.Run("principal", func(t *testing.T) {
		_, err := oozietest.Start(t.Context(), oozietest.Options{HDFS: env.HDFS, Dir: t.TempDir(),
			Kerberos: &oozietest.Kerberos{Config: env.KDC.Config, Principal: "oozie@" + kdctest.Realm, Keytab: env.HTTP.Keytab}})
		if err == nil || !strings.Contains(err.Error(), `Kerberos.Principal "oozie@CELOS.TEST" is not HTTP/<host>@REALM`) {
			t.Fatalf("start with the principal oozie: %v", err)
		}
	})
	t.Run("keytab", func(t *testing.T) {
		// Java's Krb5LoginModule as an acceptor reads the keytab only
		// for a token: Oozie starts, and refuses every token.
		s, err := oozietest.Start(t.Context(), oozietest.Options{HDFS: env.HDFS, Dir: t.TempDir(),
			Kerberos: &oozietest.Kerberos{Config: env.KDC.Config, Principal: env.HTTP.Name, Keytab: env.User.Keytab}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		resp, body := spnegoGet(t, env, s.URL()+"/versions")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Status, "GSSException") {
			t.Fatalf("a token to an Oozie without its key: %s %s, want 403 GSSException", resp.Status, body)
		}
	})
}

// spnegoGet gets u with a SPNEGO token for HTTP/localhost (gokrb5's
// client, a keytab login as env.User).
func spnegoGet(t *testing.T, env oozietest.KerberosEnv, u string) (*http.Response, []byte) {
	t.Helper()
	cfg, err := config.Load(env.KDC.Config)
	if err != nil {
		t.Fatal(err)
	}
	kt, err := keytab.Load(env.User.Keytab)
	if err != nil {
		t.Fatal(err)
	}
	cl := krbclient.NewWithKeytab(env.HDFS.User(), kdctest.Realm, kt, cfg, krbclient.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		t.Fatal(err)
	}
	defer cl.Destroy()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	resp, err := spnego.NewClient(cl, nil, "HTTP/localhost").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}
