package schema

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  string
	}{
		{"0B", 0, ""},
		{"1B", 1, ""},
		{"1GB", 1_000_000_000, ""},
		{"1 GB", 1_000_000_000, ""},
		{"100GB", 100_000_000_000, ""},
		{"500MiB", 500 << 20, ""},
		{"1.5kB", 1500, ""},
		{"1.5KB", 1500, ""},
		{"1KiB", 1024, ""},
		{"0.0001kB", 1, ""}, // rounded up
		{"8EiB", 0, "more than"},
		{"7EiB", 7 << 60, ""},
		{"1 gigs", 0, "not a number and a unit"},
		{"1GiB ", 0, "not a number and a unit"},
		{"-1GB", 0, "not a number and a unit"},
		{"1  GB", 0, "not a number and a unit"},
		{"GB", 0, "not a number and a unit"},
		{"1Gb", 0, "not a number and a unit"},
	} {
		got, err := ParseSize(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.err)
		}
	}
}
