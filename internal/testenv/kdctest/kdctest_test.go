package kdctest_test

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

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
