package oozie_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/oozietest"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
)

// The tests of this file run against the real Oozie under its own
// Kerberos authentication (oozietest.SharedKerberos): Oozie's AuthFilter
// with hadoop-auth's KerberosAuthenticationHandler and the HTTP/localhost
// keytab of a real MIT KDC, in the JVM. The client logs in with the keytab
// of <HDFS user>@CELOS.TEST, whom Oozie maps to the HDFS user.

// realKerberos is SharedKerberos and realBackend's applications and
// properties at the Kerberos Oozie's URL, with KRB5_CONFIG naming its
// realm and no credential cache.
func realKerberos(t *testing.T) (oozietest.KerberosEnv, backend) {
	t.Helper()
	b := realBackend(t)
	env := oozietest.SharedKerberos(t)
	b.url = env.Oozie.URL()
	t.Setenv("KRB5_CONFIG", env.KDC.Config)
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-such-cache"))
	return env, b
}

// sentRequest is what a client sent of one request, and the answer's
// status.
type sentRequest struct {
	Negotiate, Cookie, UserName bool
	Status                      int
}

// recorder is an http.RoundTripper that notes each request's
// authentication.
type recorder struct {
	mu   sync.Mutex
	sent []sentRequest
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	s := sentRequest{
		Negotiate: strings.HasPrefix(req.Header.Get("Authorization"), "Negotiate "),
		Cookie:    strings.Contains(req.Header.Get("Cookie"), oozie.AuthCookie+"="),
		UserName:  req.URL.Query().Has("user.name"),
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		s.Status = resp.StatusCode
	}
	r.mu.Lock()
	r.sent = append(r.sent, s)
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) requests() []sentRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentRequest(nil), r.sent...)
}

// recordedClient is a celos client of url authenticating with a, whose
// requests rec notes.
func recordedClient(t *testing.T, url string, a *oozie.SPNEGO, rec *recorder) *oozie.Client {
	return newClient(t, url, oozie.WithAuth(a), oozie.WithHTTPClient(a.HTTPClient(&http.Client{Transport: rec})), oozie.WithTimeout(time.Minute))
}

// TestKerberosRealOozie: a job submitted with a keytab login through
// Oozie's own Kerberos filter runs as the principal's user and is
// followed to SUCCEEDED: one SPNEGO negotiation, then Oozie's hadoop.auth
// cookie alone, and never ?user.name.
func TestKerberosRealOozie(t *testing.T) {
	env, b := realKerberos(t)
	rec := &recorder{}
	c := recordedClient(t, b.url, oozie.NewSPNEGO(keytabLogin(env.User), ""), rec)
	conf := b.conf(b.touchApp, "krbreal@2015-09-02T07:00Z")
	conf["outputDir"] = "/krbreal/out"
	delete(conf, "user.name") // Oozie takes the authenticated user
	id, err := c.Submit(t.Context(), conf)
	if err != nil {
		t.Fatal(err)
	}
	j := waitFinal(t, c, id)
	if j.Status != oozie.StatusSucceeded || j.User != b.user {
		t.Fatalf("job %s: %s as %q, want SUCCEEDED as %q", id, j.Status, j.User, b.user)
	}
	if _, err := env.HDFS.Client().Stat("/krbreal/out/_SUCCESS"); err != nil {
		t.Fatalf("the job's fs action wrote no _SUCCESS: %v", err)
	}
	sent := rec.requests()
	// versions (negotiated), submit, then at least one info call.
	if len(sent) < 3 {
		t.Fatalf("%d requests, want at least 3: %+v", len(sent), sent)
	}
	want := make([]sentRequest, len(sent))
	want[0] = sentRequest{Negotiate: true, Status: http.StatusOK}
	for i := 1; i < len(want); i++ {
		want[i] = sentRequest{Cookie: true, Status: http.StatusOK}
	}
	want[1].Status = http.StatusCreated
	if diff := cmp.Diff(want, sent); diff != "" {
		t.Fatalf("requests (-want +got):\n%s", diff)
	}
}

// TestKerberosRealOozieWrongSPN: a ticket for a principal the KDC knows
// but Oozie's keytab does not hold is refused by Oozie's filter; celos's
// error says which SPN was used and what to check, and there is no
// second try.
func TestKerberosRealOozieWrongSPN(t *testing.T) {
	env, b := realKerberos(t)
	other := "HTTP/other-" + strconv.FormatInt(time.Now().UnixNano(), 36) // the KDC is shared
	if _, err := env.KDC.AddPrincipal(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	c := recordedClient(t, b.url, oozie.NewSPNEGO(keytabLogin(env.User), other), rec)
	_, err := c.Versions(t.Context())
	checkKerberosError(t, err, b.url, other, env.User.Name, "Oozie refused the SPNEGO token", "oozie.authentication.kerberos.principal")
	if sent := rec.requests(); len(sent) != 1 || !sent[0].Negotiate {
		t.Errorf("requests %+v, want one with a token", sent)
	}
}

// TestKerberosRealOozieURLHost: hadoop-auth takes tickets only for
// HTTP/<the request's host>, so Oozie named by 127.0.0.1 refuses a
// ticket for its own principal, HTTP/localhost; the error says so. (The
// default SPN, HTTP/127.0.0.1, is unknown to the KDC.)
func TestKerberosRealOozieURLHost(t *testing.T) {
	env, b := realKerberos(t)
	u := strings.Replace(b.url, "//localhost:", "//127.0.0.1:", 1)
	c := spnegoClient(t, u, oozie.NewSPNEGO(keytabLogin(env.User), "HTTP/localhost"))
	_, err := c.Versions(t.Context())
	checkKerberosError(t, err, u, "HTTP/localhost", "No valid credentials provided", "only for HTTP/<the Oozie URL's host>, here HTTP/127.0.0.1")
	c = spnegoClient(t, u, oozie.NewSPNEGO(keytabLogin(env.User), ""))
	_, err = c.Versions(t.Context())
	checkKerberosError(t, err, u, "HTTP/127.0.0.1", "the KDC does not know HTTP/127.0.0.1")
}

// TestKerberosRealOozieConcurrent: many SPNEGO tokens from one principal
// reach Oozie at once, and Java's replay cache takes none of them for a
// replay (celos gives every token an authenticator time of its own
// microsecond); the same token sent twice is refused, so the cache is
// on. Then concurrent submissions through one login all run.
func TestKerberosRealOozieConcurrent(t *testing.T) {
	env, b := realKerberos(t)
	login := keytabLogin(env.User)
	const rounds, width = 4, 16
	rec := &recorder{}
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, width)
		for range width {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A login and a cookie jar of its own: every call
				// negotiates.
				c := recordedClient(t, b.url, oozie.NewSPNEGO(login, ""), rec)
				if _, err := c.Versions(t.Context()); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
	negotiated := 0
	for _, s := range rec.requests() {
		if s.Negotiate && s.Status == http.StatusOK {
			negotiated++
		}
	}
	if negotiated != rounds*width {
		t.Errorf("%d tokens accepted, want %d", negotiated, rounds*width)
	}
	checkReplayRefused(t, b.url, login)

	a := oozie.NewSPNEGO(login, "")
	c := recordedClient(t, b.url, a, &recorder{})
	ids := make(chan string, 8)
	var wg sync.WaitGroup
	for i := range cap(ids) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conf := b.conf(b.touchApp, fmt.Sprintf("krbconc@2015-09-02T%02d:00Z", i))
			conf["outputDir"] = fmt.Sprintf("/krbconc/%d", i)
			delete(conf, "user.name")
			id, err := c.Submit(t.Context(), conf)
			if err != nil {
				t.Errorf("submission %d: %v", i, err)
				return
			}
			ids <- id
		}()
	}
	wg.Wait()
	close(ids)
	for id := range ids {
		if j := waitFinal(t, c, id); j.Status != oozie.StatusSucceeded {
			t.Errorf("job %s: %s", id, j.Status)
		}
	}
}

// checkReplayRefused sends one SPNEGO token twice: Oozie accepts it once.
func checkReplayRefused(t *testing.T, url string, login oozie.KerberosLogin) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/versions", nil)
	if err := oozie.NewSPNEGO(login, "").Authenticate(req); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 2 {
		r := req.Clone(t.Context())
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got = append(got, resp.StatusCode)
	}
	if got[0] != http.StatusOK || got[1] == http.StatusOK {
		t.Fatalf("one token sent twice: %v, want 200 and a refusal (Java's replay cache)", got)
	}
}

// testRealOozieCelosServerKerberos: `celos server --keytab K --principal
// P` under a Hadoop configuration saying kerberos runs a slot through the
// real Oozie under its own Kerberos filter, to SUCCESS.
func testRealOozieCelosServerKerberos(t *testing.T) {
	env, b := realKerberos(t)
	dir := t.TempDir()
	confDir := filepath.Join(dir, "hadoop")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCoreSite(t, confDir, "kerberos")
	t.Setenv("HADOOP_CONF_DIR", confDir)
	w := fixture.Hourly("krbsrv")
	w.StartTime = t20
	w.ExternalService = fixture.Oozie(map[string]string{
		"oozie.wf.application.path": b.touchApp, "nameNode": b.props["nameNode"], "outputDir": "/krbsrv/out",
	})
	wfDir := filepath.Join(dir, "wf")
	fixture.Write(t, wfDir, fixture.Project("krbsrv", w))
	if err := os.WriteFile(filepath.Join(dir, "defaults.json"), []byte(fmt.Sprintf(`{"CELOS_DEFAULT_OOZIE": %q}`, b.url)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startCelosServer(t, dir, wfDir, "--keytab", env.User.Keytab, "--principal", env.User.Name)
	now := url.Values{"time": {slot.FormatTime(t20.Add(30 * time.Minute))}}
	s.stepUntilSuccess(t, now, "krbsrv", t20, 90*time.Second, "into a server with --keytab")
	if _, err := env.HDFS.Client().Stat("/krbsrv/out/_SUCCESS"); err != nil {
		t.Errorf("the slot's job wrote no _SUCCESS: %v", err)
	}
}

// TestSPNEGOForbiddenByOozie: a 403 that Oozie itself gives to an
// authenticated request (its error code: a user not authorized) is
// Oozie's error, not a refused token.
func TestSPNEGOForbiddenByOozie(t *testing.T) {
	r := newRealm(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("oozie-error-code", "E0508")
		w.Header().Set("oozie-error-message", "E0508: User [alice] not authorized for WF job [0000001-oozie-W]")
		w.WriteHeader(http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/oozie"
	c := spnegoClient(t, u, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	_, err := c.JobInfo(t.Context(), "0000001-oozie-W")
	var oe *oozie.Error
	var ke *oozie.KerberosError
	if !errors.As(err, &oe) || oe.Status != http.StatusForbidden || oe.Code != "E0508" || errors.As(err, &ke) {
		t.Fatalf("%v: want Oozie's E0508, not a Kerberos error", err)
	}
}
