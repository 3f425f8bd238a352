package slot

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	want := time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2015-09-13T13:40Z", want, true},
		{"2015-09-13T13:40:00Z", want, true},
		{"2015-09-13T13:40:00.000Z", want, true},
		{"2015-09-13T15:40:00+02:00", want, true},
		{"2015-09-13T09:40-04:00", want, true},
		{"2016-02-29T00:00Z", time.Date(2016, 2, 29, 0, 0, 0, 0, time.UTC), true},
		{"2015-02-29T00:00Z", time.Time{}, false},
		{"2015-09-13", time.Time{}, false},
		{"2015-09-13T13:40", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		// Offsets of 24 hours or more are not ISO 8601 (Go's parser takes them).
		{"2015-09-14T13:40:00+24:00", time.Time{}, false},
		{"2015-09-14T13:40+24:00", time.Time{}, false},
		{"2015-09-12T13:40:00-24:00", time.Time{}, false},
		{"2015-09-14T13:39:00+23:59", time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC), true},
		{"2015-09-13T13:40:00+00:60", time.Time{}, false},
		{"", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTime(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseTime(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if tt.ok && (!got.Equal(tt.want) || got.Location() != time.UTC) {
				t.Fatalf("ParseTime(%q) = %v, want %v in UTC", tt.in, got, tt.want)
			}
		})
	}
}

func TestIDRoundTrip(t *testing.T) {
	id := ID{Workflow: "word-count.nyc_1", Time: time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)}
	s := id.String()
	if s != "word-count.nyc_1@2015-09-13T13:40:00.000Z" {
		t.Fatalf("String() = %q", s)
	}
}

func TestStatusClasses(t *testing.T) {
	tests := []struct {
		s     Status
		final bool
		typ   Type
	}{
		{Waiting, false, TypeIndeterminate},
		{Ready, false, TypeIndeterminate},
		{Running, false, TypeIndeterminate},
		{Success, true, TypeSuccess},
		{Failure, true, TypeFailure},
		{WaitTimeout, true, TypeFailure},
		{Killed, true, TypeFailure},
	}
	for _, tt := range tests {
		t.Run(string(tt.s), func(t *testing.T) {
			if !tt.s.Valid() || tt.s.Final() != tt.final || tt.s.Type() != tt.typ {
				t.Fatalf("%s: valid=%v final=%v type=%v", tt.s, tt.s.Valid(), tt.s.Final(), tt.s.Type())
			}
		})
	}
	if Status("DONE").Valid() {
		t.Fatal(`Status("DONE") is valid`)
	}
}
