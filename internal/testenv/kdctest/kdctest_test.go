package kdctest_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/credentials"

	"github.com/celos-go/celos/internal/testenv/kdctest"
)

// TestRealm starts a KDC, creates a principal and kinits it from its
// keytab; klist shows the TGT of the realm. After Close the port is
// free and the directory gone.
func TestRealm(t *testing.T) {
	kdc := kdctest.StartT(t)
	alice := kdc.AddPrincipalT(t, "alice")
	if alice.Name != "alice@"+kdctest.Realm {
		t.Fatalf("principal %q", alice.Name)
	}
	cc := kdc.KinitT(t, alice, "")
	out, err := exec.Command("klist", "-c", "FILE:"+cc).CombinedOutput()
	if err != nil {
		t.Fatalf("klist: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "krbtgt/"+kdctest.Realm+"@"+kdctest.Realm) || !strings.Contains(string(out), "alice@"+kdctest.Realm) {
		t.Fatalf("klist shows no TGT for alice:\n%s", out)
	}
	// A principal that does not exist cannot kinit.
	if _, err := kdc.Kinit(t.Context(), kdctest.Principal{Name: "nobody@" + kdctest.Realm, Keytab: alice.Keytab}, ""); err == nil {
		t.Fatal("kinit of a principal absent from the keytab succeeded")
	}
}

func TestCloseStopsAndRemoves(t *testing.T) {
	kdctest.SkipIfOptedOut(t)
	kdc, err := kdctest.Start(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := kdc.Dir
	kdc.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s left after Close: %v", dir, err)
	}
	// Nothing listens on its port any more.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(kdc.Port)), 5*time.Second); err == nil {
		c.Close()
		t.Fatalf("the KDC still listens on port %d after Close", kdc.Port)
	}
}

// TestMissingProgramsFail: without MIT Kerberos, Start says what to
// install (and StartT fails the test with it).
func TestMissingProgramsFail(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // kinit is in /usr/bin, not looked up without PATH
	_, err := kdctest.Start(t.Context(), "")
	if err == nil || !strings.Contains(err.Error(), "kinit") || !strings.Contains(err.Error(), "scripts/test-deps.sh") {
		t.Fatalf("Start without kinit: %v", err)
	}
}

// TestOptOutFailsInCI runs this test binary with CELOS_SKIP_KERBEROS=1:
// the test is skipped, unless CI=true, where it fails.
func TestOptOutFailsInCI(t *testing.T) {
	if os.Getenv("KDCTEST_CHILD") == "1" {
		kdctest.StartT(t)
		return
	}
	run := func(ci string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestOptOutFailsInCI$", "-test.v")
		cmd.Env = append(os.Environ(), "KDCTEST_CHILD=1", kdctest.SkipEnv+"=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("false"); err != nil || !strings.Contains(out, "Kerberos tests skipped") {
		t.Errorf("opted out outside CI: %v\n%s", err, out)
	}
	if out, err := run("true"); err == nil || !strings.Contains(out, "not allowed in CI") {
		t.Errorf("opted out in CI: %v\n%s", err, out)
	}
}

// TestSetMaxLifeRotateRestart: a capped lifetime shows in kinit's ticket,
// a rotated key makes the keytab's new kvno work, and a stopped KDC
// serves again after Restart.
func TestSetMaxLifeRotateRestart(t *testing.T) {
	k := kdctest.StartT(t)
	alice := k.AddPrincipalT(t, "alice")
	ctx := context.Background()
	if err := k.SetMaxLife(ctx, 20*time.Second, "alice"); err != nil {
		t.Fatal(err)
	}
	cc, err := credentials.LoadCCache(k.KinitT(t, alice, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cc.GetEntries() {
		if life := c.EndTime.Sub(c.StartTime); life > 20*time.Second {
			t.Fatalf("ticket for %v lives %v, want at most 20s", c.Server.PrincipalName, life)
		}
	}
	if err := k.Rotate(ctx, alice); err != nil {
		t.Fatal(err)
	}
	k.KinitT(t, alice, "")
	k.Stop()
	if _, err := k.Kinit(ctx, alice, ""); err == nil {
		t.Fatal("kinit with the KDC stopped succeeded")
	}
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	k.KinitT(t, alice, "")
}
