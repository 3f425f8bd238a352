package oozietest

import (
	"context"
	"os"
	"os/user"
	"sync"
	"testing"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
)

// Env is an Oozie and the mini cluster it runs over.
type Env struct {
	HDFS  *hdfstest.Cluster
	Oozie *Server
}

var shared struct {
	once sync.Once
	env  Env
	err  error
}

// Shared returns the test binary's one Oozie and its mini cluster, starting
// them on first use. The package's TestMain must call Main, which stops
// them. If they cannot start, Shared fails the test with the reason (every
// later caller too, without trying again), or skips it when the developer
// opted out (CELOS_SKIP_OOZIE=1 or CELOS_SKIP_HDFS=1).
//
// Tests sharing the server work under their own HDFS directory and must not
// stop Oozie or the NameNode: use StartT for that.
func Shared(t testing.TB) Env {
	t.Helper()
	SkipIfOptedOut(t)
	shared.once.Do(func() {
		shared.env, shared.err = startEnv(context.Background(), "", "")
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.env
}

func startEnv(ctx context.Context, hdfsDir, oozieDir string) (Env, error) {
	u, err := user.Current()
	if err != nil {
		return Env{}, err
	}
	c, err := hdfstest.Start(ctx, hdfstest.Options{Dir: hdfsDir, Conf: ProxyUserConf(u.Username)})
	if err != nil {
		return Env{}, err
	}
	o, err := Start(ctx, Options{HDFS: c, Dir: oozieDir})
	if err != nil {
		c.Stop()
		return Env{}, err
	}
	return Env{HDFS: c, Oozie: o}, nil
}

// Main runs the tests, then stops the shared Oozie and its mini cluster,
// SharedKerberos's Oozie and KDC, and hdfstest's shared cluster, if they
// were started:
//
//	func TestMain(m *testing.M) { oozietest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	stopKerberos()
	if shared.env.Oozie != nil {
		shared.env.Oozie.Stop()
		shared.env.HDFS.Stop()
	}
	hdfstest.StopShared()
	os.Exit(code)
}

// StartT starts an Oozie of the test's own (for tests that stop or kill
// it), in t.TempDir(), over opts.HDFS or, if that is nil, over a mini
// cluster of its own; both are stopped at the end of the test, their logs'
// tails logged if it failed. It fails the test if they cannot start, or
// skips it when the developer opted out.
func StartT(t testing.TB, opts Options) Env {
	t.Helper()
	SkipIfOptedOut(t)
	env := Env{HDFS: opts.HDFS}
	if env.HDFS == nil {
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		env.HDFS = hdfstest.StartT(t, hdfstest.Options{Conf: ProxyUserConf(u.Username)})
		opts.HDFS = env.HDFS
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	o, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	env.Oozie = o
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("oozietest: %s", o.LogTail(30))
		}
		if err := o.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}

// SkipIfOptedOut skips the test when the developer opted out of Oozie
// (CELOS_SKIP_OOZIE=1) or of HDFS, which Oozie needs (CELOS_SKIP_HDFS=1).
// In CI (CI=true) nothing is skipped: an opt-out fails the test instead.
func SkipIfOptedOut(t testing.TB) {
	t.Helper()
	for _, v := range []string{SkipEnv, hdfstest.SkipEnv} {
		if os.Getenv(v) != "1" {
			continue
		}
		if os.Getenv("CI") == "true" {
			t.Fatal(v + "=1 is not allowed in CI (CI=true): CI runs every Oozie test")
		}
		t.Skip("Oozie tests skipped: " + v + "=1")
	}
}
