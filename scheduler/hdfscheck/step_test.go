package hdfscheck_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/hdfscheck"
	"github.com/celos-go/celos/scheduler/oozie"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// stepFixture is an engine over n hourly workflows with one slot each in
// the window, whose hdfsCheck triggers wait on paths distinct paths of a
// real HDFS reached through an RPC-counting proxy.
type stepFixture struct {
	engine *engine.Engine
	proxy  *rpcProxy
	fs     *hdfscheck.FS
	now    time.Time
}

func newStepFixture(tb testing.TB, c *hdfstest.Cluster, n, paths int) *stepFixture {
	tb.Helper()
	proxy := startRPCProxy(tb, c.Addr())
	return newStepFixtureAt(tb, c, "hdfs://"+proxy.addr, proxy, n, paths)
}

func newStepFixtureAt(tb testing.TB, c *hdfstest.Cluster, fsURI string, proxy *rpcProxy, n, paths int) *stepFixture {
	tb.Helper()
	now := time.Date(2015, 9, 12, 20, 30, 0, 0, time.UTC)
	p := &workflow.Project{Format: workflow.FormatVersion, Project: "bench"}
	for i := 0; i < n; i++ {
		w := fixture.Hourly(fmt.Sprintf("wf-%04d", i))
		w.Trigger = workflow.Trigger{Type: workflow.TriggerHDFSCheck, FS: fsURI, Path: fmt.Sprintf("/bench/in/%d/${year}${month}${day}${hour}/_READY", i%paths)}
		w.ExternalService = fixture.Oozie(map[string]string{"oozie.wf.application.path": "/app"})
		w.ExternalService.URL = "http://127.0.0.1:1/oozie"
		w.StartTime = now.Add(-time.Hour + time.Minute) // one slot: 20:00
		p.Workflows = append(p.Workflows, w)
	}
	eng, fs := newHDFSEngine(tb, c, p)
	return &stepFixture{engine: eng, proxy: proxy, fs: fs, now: now}
}

// newHDFSEngine writes project p and starts an engine over it with a file
// state database, the Oozie service (never reached: no slot gets ready)
// and a hdfscheck client of the cluster's user for hdfs: URIs.
func newHDFSEngine(tb testing.TB, c *hdfstest.Cluster, p *workflow.Project) (*engine.Engine, *hdfscheck.FS) {
	tb.Helper()
	dir := tb.TempDir()
	fixture.Write(tb, dir, p)
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	fs := hdfscheck.New(nil, hdfscheck.Options{User: c.User()})
	tb.Cleanup(func() { fs.Close() })
	mux := trigger.NewMux("")
	mux.Handle("hdfs", fs)
	eng, err := engine.New(engine.Options{
		WorkflowsDir: dir, Store: db, FS: mux,
		Services: map[string]external.Service{workflow.ServiceOozie: oozie.NewService(nil, nil)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if errs := eng.LoadErrors(); len(errs) > 0 {
		tb.Fatal(errs)
	}
	return eng, fs
}

func (f *stepFixture) step(tb testing.TB) engine.StepReport {
	tb.Helper()
	if err := f.engine.Step(context.Background(), f.now, nil); err != nil {
		tb.Fatal(err)
	}
	r := f.engine.LastStep()
	if r.Workflows == 0 || len(r.Errors) > 0 || r.Transitions[slot.Ready] > 0 {
		tb.Fatalf("step: %+v", r)
	}
	return r
}

// A step over 500 waiting workflows sends the NameNode one getFileInfo
// per distinct path, counted on the wire.
func TestStepRPCsPerDistinctPath(t *testing.T) {
	c := hdfstest.Shared(t)
	for _, paths := range []int{500, 100} {
		f := newStepFixture(t, c, 500, paths)
		for i := 0; i < 2; i++ {
			before := f.proxy.count("getFileInfo")
			r := f.step(t)
			if got := f.proxy.count("getFileInfo") - before; got != paths {
				t.Errorf("%d paths, step %d: %d getFileInfo RPCs, want %d", paths, i, got, paths)
			}
			if r.Slots != 500 {
				t.Errorf("step considered %d slots, want 500", r.Slots)
			}
		}
		if st := f.fs.Stats(); st.Connects != 1 {
			t.Errorf("%d connections for two steps, want 1 kept", st.Connects)
		}
	}
}

// BenchmarkStep500WaitingHDFS: one step over 500 workflows whose hdfsCheck
// triggers all wait, against the real mini cluster: "direct" to the
// NameNode, and "counted" through the RPC-counting proxy (one more hop),
// which reports getFileInfo RPCs per step.
//
//	go test -run '^$' -bench Step500 -benchtime 20x ./scheduler/hdfscheck/
func BenchmarkStep500WaitingHDFS(b *testing.B) {
	c := hdfstest.Shared(b)
	b.Run("direct", func(b *testing.B) {
		f := newStepFixtureAt(b, c, "hdfs://"+c.Addr(), nil, 500, 500)
		f.step(b) // connect
		before := f.fs.Stats().Calls
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.step(b)
		}
		b.StopTimer()
		b.ReportMetric(float64(f.fs.Stats().Calls-before)/float64(b.N), "stat/step")
	})
	b.Run("counted", func(b *testing.B) {
		f := newStepFixture(b, c, 500, 500)
		f.step(b)
		before := f.proxy.count("getFileInfo")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f.step(b)
		}
		b.StopTimer()
		b.ReportMetric(float64(f.proxy.count("getFileInfo")-before)/float64(b.N), "getFileInfo/step")
	})
}
