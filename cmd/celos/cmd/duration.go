package cmd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/celos-go/celos/internal/humandur"
)

// durationFlag is a flag that takes a duration as a person writes it
// (90s, 10m, 1h30m, 30d, 2w; see humandur) and prints its value the same
// way. With seconds, a plain integer is a number of seconds, as Celos's
// --autoSchedule N.
type durationFlag struct {
	d       *time.Duration
	seconds bool
}

func newDurationFlag(d *time.Duration, def time.Duration, seconds bool) *durationFlag {
	*d = def
	return &durationFlag{d: d, seconds: seconds}
}

func (f *durationFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if f.seconds {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if n > int64(1<<63-1)/int64(time.Second) || n < -int64(1<<63-1)/int64(time.Second) {
				return fmt.Errorf("%d seconds is too long", n)
			}
			*f.d = time.Duration(n) * time.Second
			return nil
		}
	}
	d, err := humandur.Parse(s)
	if err != nil {
		if f.seconds {
			return fmt.Errorf("want seconds (60) or a duration such as 90s, 10m, 1h")
		}
		return err
	}
	*f.d = d
	return nil
}

// String is the value as a person writes it; zero is "0", which --help
// leaves out as no default.
func (f *durationFlag) String() string {
	if *f.d == 0 {
		return "0"
	}
	return humandur.Format(*f.d)
}

func (f *durationFlag) Type() string { return "duration" }
