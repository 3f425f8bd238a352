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
	sc := spnego.NewClient(cl, nil, "HTTP/localhost")
	req, _ := http.NewRequest(http.MethodGet, base+"/v2/jobs?jobtype=wf", nil)
	resp, err = sc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
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
	req, _ = http.NewRequest(http.MethodGet, base+"/v1/admin/status", nil)
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
