package hdfstest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var shared struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

// Shared returns the test binary's one mini cluster, starting it on first
// use (about 4 s). The package's TestMain must call Main, which stops it.
// If it cannot start, Shared fails the test with the reason (every later
// caller too, without trying again), or skips it when CELOS_SKIP_HDFS=1.
//
// Tests sharing the cluster should work under their own directory (e.g.
// "/"+t.Name()) and must not stop its NameNode: use Start for that.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	SkipIfOptedOut(t)
	shared.once.Do(func() {
		shared.cluster, shared.err = Start(context.Background(), Options{})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cluster
}

// Main runs the tests and then stops the shared cluster, if one was started:
//
//	func TestMain(m *testing.M) { hdfstest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the shared cluster, if one was started. It is for a
// TestMain that cannot call Main (one that also stops other shared
// servers, as oozietest.Main does).
func StopShared() {
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
}

// StartT starts a cluster of the test's own (for tests that stop its
// NameNode or DataNodes), in t.TempDir(), stopped at the end of the test.
// It fails the test if the cluster cannot start, or skips it when
// CELOS_SKIP_HDFS=1.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	SkipIfOptedOut(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hdfstest: last lines of %s:\n%s", c.LogPath(), c.LogTail(30))
		}
		c.Stop()
	})
	return c
}

// SkipIfOptedOut skips the test when CELOS_SKIP_HDFS=1 (the developer opted
// out of HDFS tests). In CI (CI=true) nothing is skipped: the opt-out fails
// the test instead.
func SkipIfOptedOut(t testing.TB) {
	t.Helper()
	if os.Getenv(SkipEnv) != "1" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(SkipEnv + "=1 is not allowed in CI (CI=true): CI runs every HDFS test")
	}
	t.Skip("HDFS tests skipped: " + SkipEnv + "=1")
}

// CoreSite returns the cluster's core-site.xml (fs.defaultFS naming its
// NameNode), for a test that writes it into an installation or a target of
// its own. It fails the test if the file cannot be read.
func (c *Cluster) CoreSite(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.confDir, "core-site.xml"))
	if err != nil {
		t.Fatalf("hdfstest: read the cluster's core-site.xml: %v", err)
	}
	return string(data)
}
