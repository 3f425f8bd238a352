package cluster

import (
	"testing"
	"time"
)

// BenchmarkTick10000: the steady tick of one of 3 instances sharing 10,000
// workflows (heartbeat, renewal of its ~3,333 leases, membership; nothing
// moves): 3 statements whatever the number of workflows.
func BenchmarkTick10000(b *testing.B) {
	pool := openPool(b, newDB(b))
	wfs := wfNames(10000)
	cs := []*Cluster{member(b, pool, "celos-1", time.Hour, wfs...), member(b, pool, "celos-2", time.Hour, wfs...), member(b, pool, "celos-3", time.Hour, wfs...)}
	for range 2 {
		tick(b, cs...)
	}
	if n := len(cs[0].Owned()); n < 3000 {
		b.Fatalf("celos-1 owns %d workflows", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tick(b, cs[0])
	}
}

// BenchmarkBeginStep10000: what a step of an instance holding ~3,333 of
// 10,000 workflows' leases adds before it begins (one query).
func BenchmarkBeginStep10000(b *testing.B) {
	pool := openPool(b, newDB(b))
	wfs := wfNames(10000)
	cs := []*Cluster{member(b, pool, "celos-1", time.Hour, wfs...), member(b, pool, "celos-2", time.Hour, wfs...), member(b, pool, "celos-3", time.Hour, wfs...)}
	for range 2 {
		tick(b, cs...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := cs[0].BeginStep(ctxT(b)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck: the fence of one write transaction of one workflow.
func BenchmarkCheck(b *testing.B) {
	pool := openPool(b, newDB(b))
	c := member(b, pool, "celos-1", time.Hour, "wf")
	tick(b, c)
	ctx := ctxT(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tx, err := pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Check(ctx, tx, []string{"wf"}); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
