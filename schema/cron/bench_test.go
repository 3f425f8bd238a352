package cron_test

import (
	"testing"
	"time"

	"github.com/celos-go/celos/schema/cron"
)

// benchBetween enumerates [from, from+7 days) into a reused slice and
// reports ns per fire time ("ns/slot") besides ns/op and allocs/op.
func benchBetween(b *testing.B, expr, zone string, from time.Time, wantSlots int) {
	loc := time.UTC
	if zone != "" {
		loc = mustLoc(b, zone)
	}
	e, err := cron.Parse(expr, loc)
	if err != nil {
		b.Fatal(err)
	}
	to := from.Add(7 * 24 * time.Hour)
	buf := e.Between(from, to)
	if len(buf) != wantSlots {
		b.Fatalf("%d slots, want %d", len(buf), wantSlots)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf = e.AppendBetween(buf[:0], from, to)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(wantSlots, 1)), "ns/slot")
}

var benchFrom = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func BenchmarkBetweenMinutely7Days(b *testing.B) {
	benchBetween(b, "0 * * * * ?", "", benchFrom, 10080)
}

// The window contains New York's spring-forward change (2024-03-10).
func BenchmarkBetweenMinutely7DaysDST(b *testing.B) {
	benchBetween(b, "0 * * * * ?", "America/New_York", time.Date(2024, 3, 7, 0, 0, 0, 0, time.UTC), 10080)
}

func BenchmarkBetweenHourly7Days(b *testing.B) {
	benchBetween(b, "0 0 * * * ?", "", benchFrom, 168)
}

func BenchmarkBetweenComplex7Days(b *testing.B) {
	// Every 10 s in minutes 5-20 and 40-50 of hours 8-18 on weekdays.
	benchBetween(b, "*/10 5-20,40-50 8-18 ? * MON-FRI", "Europe/London", benchFrom, 5*11*27*6)
}

// A fresh slice per call, as Between does: the allocations of the result.
func BenchmarkBetweenMinutely7DaysFresh(b *testing.B) {
	e, err := cron.Parse("0 * * * * ?", time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	to := benchFrom.Add(7 * 24 * time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if n := len(e.Between(benchFrom, to)); n != 10080 {
			b.Fatal(n)
		}
	}
}

func BenchmarkNextImpossible(b *testing.B) {
	e, err := cron.Parse("0 0 0 31 2 ?", mustLoc(b, "Europe/London"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !e.Next(benchFrom).IsZero() {
			b.Fatal("fired")
		}
	}
}

func BenchmarkNextHourly(b *testing.B) {
	e, err := cron.Parse("0 0 * * * ?", mustLoc(b, "America/New_York"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Next(benchFrom)
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cron.Parse("*/10 5-20,40-50 8-18 ? * MON-FRI 2024-2030", time.UTC); err != nil {
			b.Fatal(err)
		}
	}
}
