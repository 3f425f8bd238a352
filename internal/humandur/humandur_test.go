package humandur

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"5s", 5 * time.Second},
		{"90s", 90 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"30d", 30 * day},
		{"2w", 14 * day},
		{"1w2d", 9 * day},
		{"1d12h", 36 * time.Hour},
		{"1d1h30m", 25*time.Hour + 30*time.Minute},
		{" 8d ", 8 * day},
		{"0", 0},
		{"-1d", -day},
		{"1.5h", 90 * time.Minute},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "d", "5", "1x", "h1", "1h1d", "1.5d", "--1d", "1d-1h", "ds"} {
		if got, err := Parse(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, %v; want ErrSyntax", in, got, err)
		}
	}
	for _, in := range []string{"99999999999999d", "15251w", "106751d23h47m16.854775808s"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v; want an overflow error", in, got)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{192 * time.Hour, "8d"},
		{14 * day, "14d"},
		{36 * time.Hour, "1d12h"},
		{time.Hour, "1h"},
		{90 * time.Minute, "1h30m"},
		{5 * time.Second, "5s"},
		{90 * time.Second, "1m30s"},
		{1500 * time.Millisecond, "1.5s"},
		{250 * time.Millisecond, "250ms"},
		{day + time.Second, "1d1s"},
		{-8 * day, "-8d"},
	} {
		if got := Format(tc.in); got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRoundTrip: what Format prints, Parse reads back.
func TestRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, time.Second, 61 * time.Minute, 8 * day, 9*day + 3*time.Hour + 7*time.Second + 5*time.Millisecond} {
		got, err := Parse(Format(d))
		if err != nil || got != d {
			t.Errorf("Parse(Format(%v)=%q) = %v, %v", d, Format(d), got, err)
		}
	}
}
