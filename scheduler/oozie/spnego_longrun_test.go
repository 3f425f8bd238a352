package oozie_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/oozie"
)

// shortLife is the lifetime of alice's tickets in the long-run tests: a
// long-running server sees several expire.
const shortLife = 10 * time.Second

// shortLivedRealm is newRealm with alice's tickets (and the TGT) living
// shortLife and not renewable.
func shortLivedRealm(t *testing.T) realm {
	t.Helper()
	r := newRealm(t)
	if err := r.kdc.SetMaxLife(context.Background(), shortLife, "alice", "HTTP/localhost"); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSPNEGOLongRunKeytab: a server logged in with a keytab keeps talking
// to Oozie across several ticket lifetimes (Oozie's cookie refused every
// time, so each request needs a service ticket), and after the key is
// rotated (a new kvno in the keytab) while it runs.
func TestSPNEGOLongRunKeytab(t *testing.T) {
	r := shortLivedRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	end := time.Now().Add(3*shortLife + shortLife/2)
	rotated := false
	for n := 0; time.Now().Before(end); n++ {
		o.forgetCookies()
		if err := submitAndInfo(t, c); err != nil {
			t.Fatalf("request %d, %v after the start (rotated: %v): %v", n, time.Until(end)-3*shortLife-shortLife/2, rotated, err)
		}
		if !rotated && time.Until(end) < 2*shortLife {
			if err := r.kdc.Rotate(context.Background(), r.alice); err != nil {
				t.Fatal(err)
			}
			rotated = true
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSPNEGOLongRunKDCOutage: with the KDC down once the tickets have
// expired, a request fails as unavailable, naming the principal and the
// cause; it works again by itself once the KDC is back.
func TestSPNEGOLongRunKDCOutage(t *testing.T) {
	r := shortLivedRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), ""))
	if err := submitAndInfo(t, c); err != nil {
		t.Fatal(err)
	}
	r.kdc.Stop()
	var err error
	for deadline := time.Now().Add(3 * shortLife); ; {
		o.forgetCookies()
		if _, err = c.Submit(t.Context(), wfConf); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests still succeed %v after the KDC stopped", 3*shortLife)
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkKerberosError(t, err, o.URL, "HTTP/localhost", r.alice.Name, "127.0.0.1:"+strconv.Itoa(r.kdc.Port))
	if err := r.kdc.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.forgetCookies()
	if err := submitAndInfo(t, c); err != nil {
		t.Fatalf("after the KDC is back: %v", err)
	}
}

// TestSPNEGOLongRunNoLeak: logging in again (here after every refused
// service ticket: the SPN is unknown to the KDC) does not leave the old
// logins' renewal goroutines running for the life of the server.
func TestSPNEGOLongRunNoLeak(t *testing.T) {
	r := newRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(keytabLogin(r.alice), "HTTP/nosuchhost"))
	_, _ = c.Submit(t.Context(), wfConf)
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	for range 50 {
		_, _ = c.Submit(t.Context(), wfConf)
	}
	var after int
	for deadline := time.Now().Add(10 * time.Second); ; {
		after = runtime.NumGoroutine()
		if after < before+10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after >= before+10 {
		t.Fatalf("%d goroutines after 50 refused requests, %d before: the old logins are not destroyed", after, before)
	}
}

// TestSPNEGOLongRunCacheRemoved: a server on a credential cache whose
// file is removed while it runs fails, once the ticket has expired, as
// unavailable naming the principal it was logged in as and the cache; a
// new cache written at the same path (kinit, k5start) is used at the next
// request.
func TestSPNEGOLongRunCacheRemoved(t *testing.T) {
	r := shortLivedRealm(t)
	o := startKerberizedOozie(t, r.http.Keytab)
	cc := r.kdc.KinitT(t, r.alice, "")
	t.Setenv("KRB5CCNAME", cc)
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(cacheLogin(), ""))
	if err := submitAndInfo(t, c); err != nil {
		t.Fatal(err)
	}
	waitExpired(t, cc)
	if err := os.Remove(cc); err != nil {
		t.Fatal(err)
	}
	o.forgetCookies()
	_, err := c.Submit(t.Context(), wfConf)
	checkKerberosError(t, err, o.URL, "HTTP/localhost", "as "+r.alice.Name, cc, "run kinit")
	fresh := r.kdc.KinitT(t, r.alice, "")
	if err := os.Rename(fresh, cc); err != nil {
		t.Fatal(err)
	}
	if err := submitAndInfo(t, c); err != nil {
		t.Fatalf("after kinit into %s: %v", cc, err)
	}
}

// TestSPNEGOLongRunRenewLimit: a server on a credential cache holding a
// renewable ticket, renewed in place outside celos (kinit -R from cron, as
// docs/oozie.md asks), goes on past the ticket's lifetime; once the renew
// limit is reached it fails as unavailable naming the principal and asking
// for kinit, and a new kinit into the cache is used at the next request.
func TestSPNEGOLongRunRenewLimit(t *testing.T) {
	r := shortLivedRealm(t)
	const renewLimit = 3 * shortLife
	ctx := context.Background()
	if err := r.kdc.SetMaxRenewableLife(ctx, renewLimit, "alice"); err != nil {
		t.Fatal(err)
	}
	o := startKerberizedOozie(t, r.http.Keytab)
	cc, err := r.kdc.Kinit(ctx, r.alice, "", "-r", strconv.Itoa(int(renewLimit/time.Second))+"s")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KRB5CCNAME", cc)
	start := time.Now()
	c := spnegoClient(t, o.URL, oozie.NewSPNEGO(cacheLogin(), ""))
	var lastOK, lastRenew time.Duration
	renewing := true
	for {
		if since := time.Since(start); renewing && since-lastRenew > shortLife/2 {
			if err := r.kdc.Renew(ctx, cc); err != nil {
				t.Logf("kinit -R %v after kinit: %v", since, err)
				renewing = false // the renew limit
			}
			lastRenew = since
		}
		o.forgetCookies()
		_, err = c.Submit(t.Context(), wfConf)
		if err != nil {
			break
		}
		lastOK = time.Since(start)
		if lastOK > renewLimit+2*shortLife {
			t.Fatalf("requests still succeed %v after kinit, past the renew limit %v", lastOK, renewLimit)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if lastOK < renewLimit-shortLife/2 {
		t.Fatalf("the last request that worked was %v after kinit; the ticket lives %v and is renewed in place up to %v: %v", lastOK, shortLife, renewLimit, err)
	}
	checkKerberosError(t, err, o.URL, "HTTP/localhost", "as "+r.alice.Name, "run kinit")
	fresh := r.kdc.KinitT(t, r.alice, "")
	if err := os.Rename(fresh, cc); err != nil {
		t.Fatal(err)
	}
	if err := submitAndInfo(t, c); err != nil {
		t.Fatalf("after kinit into %s: %v", cc, err)
	}
}
