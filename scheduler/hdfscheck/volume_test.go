package hdfscheck_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/hdfstest"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/hdfscheck"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/targets"
	"github.com/celos-go/celos/targets/hadoopconf"
)

func i64(n int64) *int64 { return &n }

// putFile writes a file of size bytes on the cluster (through targets,
// which waits out the NameNode's "replication in progress").
func putFile(t testing.TB, c *hdfstest.Cluster, p string, size int) {
	t.Helper()
	pool := targets.NewHDFSPool(nil, targets.HDFSOptions{Client: hadoopconf.Options{User: c.User()}})
	defer pool.Close()
	h, err := pool.FS("hdfs://" + c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.MkdirAll(p[:strings.LastIndexByte(p, '/')]); err != nil {
		t.Fatal(err)
	}
	h.Remove(p)
	if err := h.WriteNew(context.Background(), p, bytes.NewReader(make([]byte, size)), int64(size), true); err != nil {
		t.Fatal(err)
	}
}

// TestDataVolumeOnHDFS: a dataVolume trigger against the real mini
// cluster: count and bytes of the matching files, hidden files and
// directories left out, a missing directory is not ready without error,
// a NameNode that is down is not ready with the error.
func TestDataVolumeOnHDFS(t *testing.T) {
	c := hdfstest.Shared(t)
	dir := "/" + t.Name() + "/2015-09-12/20"
	putFile(t, c, dir+"/part-0", 1500)
	putFile(t, c, dir+"/part-1", 2500)
	putFile(t, c, dir+"/_SUCCESS", 0)
	putFile(t, c, dir+"/part-dir/x", 9000)
	f := hdfscheck.New(nil, hdfscheck.Options{User: c.User()})
	defer f.Close()
	mux := trigger.NewMux("hdfs://" + c.Addr())
	mux.Handle("hdfs", f)
	at := time.Date(2015, 9, 12, 20, 0, 0, 0, time.UTC)
	dv := func(p string, files, bytes int64) workflow.Trigger {
		return workflow.Trigger{Type: workflow.TriggerDataVolume, Path: p, MinFiles: i64(files), MinBytes: i64(bytes)}
	}
	glob := "/" + t.Name() + "/${year}-${month}-${day}/${hour}/part-*"
	for _, tc := range []struct {
		trig         workflow.Trigger
		ready        bool
		files, bytes int64
	}{
		{dv(glob, 2, 4000), true, 2, 4000},
		{dv(glob, 3, 0), false, 2, 4000},
		{dv(glob, 1, 4001), false, 2, 4000},
		{dv("/"+t.Name()+"/${year}-${month}-${day}/${hour}/_*", 1, 0), true, 1, 0},
		{dv("/"+t.Name()+"/none/*", 1, 0), false, 0, 0},
		{dv(c.URL(glob), 2, 0), true, 2, 4000}, // a full URI as the path
	} {
		st := trigger.Evaluate(context.Background(), trigger.Env{FS: mux}, &tc.trig, at, at)
		if st.Error != "" || st.Ready != tc.ready || st.Files == nil || *st.Files != tc.files || *st.Bytes != tc.bytes {
			t.Errorf("%s: %+v, want ready=%v %d files %d bytes", tc.trig.Path, st, tc.ready, tc.files, tc.bytes)
		}
	}

	// A NameNode nobody listens on.
	down := hdfscheck.New(nil, hdfscheck.Options{User: c.User(), CallTimeout: 5 * time.Second})
	defer down.Close()
	dead := trigger.NewMux("hdfs://127.0.0.1:1")
	dead.Handle("hdfs", down)
	tr := dv(glob, 1, 0)
	st := trigger.Evaluate(context.Background(), trigger.Env{FS: dead}, &tr, at, at)
	if st.Ready || !strings.Contains(st.Error, "hdfs://127.0.0.1:1") {
		t.Errorf("NameNode down: %+v", st)
	}
}

// newVolumeFixture is an engine over 1,000 hourly workflows, three slots
// each in the window, whose dataVolume triggers name 100 distinct globs
// (one directory per day, so the three slots share it) through the
// RPC-counting proxy. The directories of every other glob hold one 10-byte
// file.
func newVolumeFixture(tb testing.TB) (*engine.Engine, *rpcProxy, time.Time) {
	tb.Helper()
	const n, globs = 1000, 100
	c := hdfstest.Shared(tb)
	for g := 0; g < globs; g += 2 {
		putFile(tb, c, fmt.Sprintf("/volume/in/%d/20150912/part-0", g), 10)
	}
	proxy := startRPCProxy(tb, c.Addr())
	fsURI := "hdfs://" + proxy.addr
	now := time.Date(2015, 9, 12, 20, 30, 0, 0, time.UTC)
	p := &workflow.Project{Format: workflow.FormatVersion, Project: "bench"}
	for i := 0; i < n; i++ {
		p.Workflows = append(p.Workflows, workflow.Workflow{
			ID:       fmt.Sprintf("wf-%04d", i),
			Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
			Trigger: workflow.Trigger{Type: workflow.TriggerDataVolume, FS: fsURI,
				Path: fmt.Sprintf("/volume/in/%d/${year}${month}${day}/part-*", i%globs), MinFiles: i64(1000), MinBytes: i64(1 << 30)},
			SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
			ExternalService:    workflow.ExternalService{Type: workflow.ServiceOozie, URL: "http://127.0.0.1:1/oozie", Properties: map[string]string{"oozie.wf.application.path": "/app"}},
			StartTime:          now.Add(-3*time.Hour + time.Minute), // three slots: 18:00, 19:00, 20:00
			WaitTimeoutSeconds: workflow.NeverTimeout,
		})
	}
	eng, _ := newHDFSEngine(tb, c, p)
	return eng, proxy, now
}

func stepVolume(tb testing.TB, eng *engine.Engine, now time.Time, slots int) {
	tb.Helper()
	if err := eng.Step(context.Background(), now, nil); err != nil {
		tb.Fatal(err)
	}
	r := eng.LastStep()
	if r.Slots != slots || len(r.Errors) > 0 || r.Transitions[slot.Ready] > 0 {
		tb.Fatalf("step: %+v", r)
	}
}

// TestDataVolumeStepListsEachGlobOnce: a step over 1,000 workflows with
// three waiting slots each, whose dataVolume triggers name 100 distinct
// globs (half of whose directories exist), sends the NameNode at most one
// getListing RPC per distinct glob, counted on the wire, step after step.
// (The HDFS client stats a directory before it lists it: one getFileInfo
// per distinct glob too, the only RPC for a directory that does not
// exist.)
func TestDataVolumeStepListsEachGlobOnce(t *testing.T) {
	eng, proxy, now := newVolumeFixture(t)
	for i := 0; i < 2; i++ {
		list, stat := proxy.count("getListing"), proxy.count("getFileInfo")
		stepVolume(t, eng, now, 3000)
		list, stat = proxy.count("getListing")-list, proxy.count("getFileInfo")-stat
		t.Logf("step %d: %d getListing, %d getFileInfo RPCs", i, list, stat)
		if list != 50 || stat > 100 {
			t.Errorf("step %d: %d getListing RPCs (want 50: one per distinct glob whose directory exists), %d getFileInfo (want at most 100)", i, list, stat)
		}
	}
	st, err := eng.TriggerStatus(context.Background(), slot.ID{Workflow: "wf-0010", Time: now.Truncate(time.Hour)}, now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Type != trigger.TypeDataVolume || st.Files == nil || *st.Files != 1 || *st.Bytes != 10 {
		t.Errorf("/trigger-status of wf-0010: %+v", st)
	}
}

// BenchmarkStepDataVolume1000: one step over 1,000 workflows (three
// waiting slots each) with dataVolume triggers on 100 distinct globs,
// (half of whose directories exist), against the real mini cluster through
// the RPC-counting proxy: step time, getListing and getFileInfo RPCs per
// step.
//
//	go test -run '^$' -bench StepDataVolume1000 -benchtime 20x -benchmem ./scheduler/hdfscheck/
func BenchmarkStepDataVolume1000(b *testing.B) {
	eng, proxy, now := newVolumeFixture(b)
	stepVolume(b, eng, now, 3000) // connect, read the state
	list, stat := proxy.count("getListing"), proxy.count("getFileInfo")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stepVolume(b, eng, now, 3000)
	}
	b.StopTimer()
	b.ReportMetric(float64(proxy.count("getListing")-list)/float64(b.N), "getListing/step")
	b.ReportMetric(float64(proxy.count("getFileInfo")-stat)/float64(b.N), "getFileInfo/step")
}
