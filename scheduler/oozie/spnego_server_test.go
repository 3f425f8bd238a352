package oozie_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/ooziefake"
	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/slot"
)

// testSPNEGOCelosServer runs `celos server` whose Hadoop configuration
// ($HADOOP_CONF_DIR) says hadoop.security.authentication=kerberos against
// the Kerberos-protected Oozie fake: without a credential cache the slot
// does not start and the log says to run kinit; once the cache is there
// (kinit, no restart) the slot is submitted as alice and succeeds.
func testSPNEGOCelosServer(t *testing.T) {
	k := newKerberizedServerDir(t)
	r, o, now := k.realm, k.oozie, k.now
	cache := filepath.Join(k.dir, "krb5cc")
	t.Setenv("KRB5CCNAME", "FILE:"+cache)
	s := startCelosServer(t, k.dir, k.wfDir)
	s.step(t, now)
	s.step(t, now)
	if st, _ := slotState(t, s.url, "krb", t20); st == "RUNNING" || st == "SUCCESS" {
		t.Fatalf("slot %s without a credential cache\n%s", st, s.log.String())
	}
	if log := s.log.String(); !strings.Contains(log, "run kinit") || !strings.Contains(log, "HTTP/localhost") {
		t.Fatalf("the server's log does not say to run kinit for HTTP/localhost:\n%s", log)
	}
	data, err := os.ReadFile(r.kdc.KinitT(t, r.alice, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cache, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s.stepUntilSuccess(t, now, "krb", t20, 60*time.Second, "after kinit")
	got := o.counts()
	if got.Negotiations != 1 || got.Principals[0] != r.alice.Name || got.CookieHits == 0 {
		t.Fatalf("authentication %+v: want one negotiation as %s, then the cookie", got, r.alice.Name)
	}
}

// testSPNEGOCelosServerKeytab: `celos server --keytab K --principal P`
// logs in with the keytab, with no credential cache at all (a server's
// tickets from kinit expire; a keytab's are renewed by logging in again),
// and its Oozie calls authenticate as P.
func testSPNEGOCelosServerKeytab(t *testing.T) {
	k := newKerberizedServerDir(t) // KRB5CCNAME names no cache
	r, o, now := k.realm, k.oozie, k.now
	s := startCelosServer(t, k.dir, k.wfDir, "--keytab", r.alice.Keytab, "--principal", r.alice.Name)
	s.stepUntilSuccess(t, now, "krb", t20, 60*time.Second, "into a server with --keytab")
	if got := o.counts(); got.Negotiations == 0 || got.Principals[0] != r.alice.Name {
		t.Fatalf("authentication %+v: want negotiations as %s", got, r.alice.Name)
	}
}

// kerberizedServerDir is the setting of a `celos server` test under
// Kerberos: a realm, the Kerberos-protected Oozie fake (its jobs run,
// then succeed), and a directory with a Hadoop configuration saying
// kerberos ($HADOOP_CONF_DIR), the defaults naming that Oozie, and the
// workflow krb (hourly from t20) in wfDir.
type kerberizedServerDir struct {
	realm      realm
	oozie      *kerberizedOozie
	dir, wfDir string
	now        url.Values // the step time: t20's slot is due
}

func newKerberizedServerDir(t *testing.T) kerberizedServerDir {
	t.Helper()
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	o.fake.SetPlan(func(map[string]string) []string { return []string{ooziefake.Running, ooziefake.Succeeded} })
	dir := t.TempDir()
	confDir := filepath.Join(dir, "hadoop")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeCoreSite(t, confDir, "kerberos")
	t.Setenv("HADOOP_CONF_DIR", confDir)
	w := fixture.Hourly("krb")
	w.ExternalService = fixture.Oozie(map[string]string{"oozie.wf.application.path": "hdfs://nn/apps/krb"})
	w.StartTime = t20
	wfDir := filepath.Join(dir, "wf")
	fixture.Write(t, wfDir, fixture.Project("krb", w))
	if err := os.WriteFile(filepath.Join(dir, "defaults.json"), []byte(fmt.Sprintf(`{"CELOS_DEFAULT_OOZIE": %q}`, o.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	return kerberizedServerDir{realm: r, oozie: o, dir: dir, wfDir: wfDir, now: url.Values{"time": {slot.FormatTime(t20.Add(30 * time.Minute))}}}
}
