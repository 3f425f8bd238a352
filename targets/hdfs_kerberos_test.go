package targets

import (
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/kdctest"
	"github.com/celos-go/celos/targets/hadoopconf"
)

// TestHDFSKerberosLoginsNotLeaked: every connection to a secured HDFS
// logs in to Kerberos; a NameNode that is down for a long while (each
// retry after the cool-down a new login) must not leave one live gokrb5
// client, and its TGT renewal goroutine re-logging in to the KDC, per
// retry for the life of the server.
func TestHDFSKerberosLoginsNotLeaked(t *testing.T) {
	kdc := kdctest.StartT(t)
	alice := kdc.AddPrincipalT(t, "alice")
	t.Setenv("KRB5_CONFIG", kdc.Config)
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-such-cache"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a NameNode that is down: connection refused
	conf := hadoopconf.Conf{
		"fs.defaultFS":                    "hdfs://" + addr,
		"hadoop.security.authentication":  "kerberos",
		"dfs.namenode.kerberos.principal": "nn/localhost@" + kdctest.Realm,
	}
	pool := NewHDFSPool(conf, HDFSOptions{
		Client:   hadoopconf.Options{Keytab: alice.Keytab, Principal: alice.Name},
		CoolDown: time.Millisecond,
	})
	defer pool.Close()
	h, err := pool.FS("")
	if err != nil {
		t.Fatal(err)
	}
	try := func() {
		time.Sleep(2 * time.Millisecond) // past the cool-down
		if _, err := h.Exists(t.Context(), "/x"); err == nil {
			t.Fatal("Exists on a NameNode that is down succeeded")
		}
	}
	try()
	before := runtime.NumGoroutine()
	for range 30 {
		try()
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
		t.Fatalf("%d goroutines after 30 failed connections to %s, %d before: their Kerberos logins are not destroyed", after, addr, before)
	}
}
