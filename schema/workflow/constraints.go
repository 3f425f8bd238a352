package workflow

// Run constraints, pools and priority, SLAs and notification targets: the
// workflow-level fields of issue 14 (constraints, pool, priority, sla,
// notify). Each is optional; absent means none.

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Constraints are checked when a READY slot would be submitted: while one
// does not hold, the slot stays READY and says why. TimeoutSeconds (from the
// slot time, like WaitTimeoutSeconds) ends the wait as OnTimeout says.
type Constraints struct {
	// TimeWindow, if set, is when a slot may be submitted.
	TimeWindow *TimeWindow `json:"timeWindow,omitempty"`
	// MinIntervalSeconds (≥ 0) must have passed since the workflow's last
	// submission; 0 means no minimum.
	MinIntervalSeconds int64 `json:"minIntervalSeconds"`
	// MaxRuns, if set, bounds the submissions per period.
	MaxRuns *MaxRuns `json:"maxRuns,omitempty"`
	// TimeoutSeconds is measured from the slot time; NeverTimeout means
	// the slot waits for its constraints forever.
	TimeoutSeconds int64 `json:"timeoutSeconds"`
	// OnTimeout is OnTimeoutGiveUp or OnTimeoutRun.
	OnTimeout string `json:"onTimeout"`
}

// RunLookBack is how far back the submissions of a workflow with
// constraints c count: the longer of MinIntervalSeconds and MaxRuns'
// period, saturating at the longest Duration (0: they do not count; a nil
// c has none). What is submitted earlier can be forgotten (and pruned).
func (c *Constraints) RunLookBack() time.Duration {
	if c == nil {
		return 0
	}
	s := c.MinIntervalSeconds
	if c.MaxRuns != nil {
		s = max(s, c.MaxRuns.PeriodSeconds)
	}
	if s <= 0 {
		return 0
	}
	if s > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s) * time.Second
}

// What a slot whose constraints still do not hold after TimeoutSeconds
// becomes.
const (
	// OnTimeoutGiveUp: the slot becomes WAIT_TIMEOUT.
	OnTimeoutGiveUp = "waitTimeout"
	// OnTimeoutRun: the slot is submitted anyway (the serial concurrency
	// and its pool still apply).
	OnTimeoutRun = "run"
)

// TimeWindow is a daily window of wall-clock time in a time zone: From
// inclusive, To exclusive, both "HH:MM". From after To crosses midnight
// (22:00–06:00). On a day when a clock change skips part of the window,
// that part does not exist; a repeated hour is in the window both times.
type TimeWindow struct {
	From     string `json:"from"`
	To       string `json:"to"`
	TimeZone string `json:"timeZone"`
}

// MaxRuns bounds the submissions of a workflow: at most Count in any
// PeriodSeconds (a sliding period ending now).
type MaxRuns struct {
	Count         int   `json:"count"`
	PeriodSeconds int64 `json:"periodSeconds"`
}

// SLA is a service-level objective of every slot.
type SLA struct {
	// SuccessWithinSeconds: a slot not SUCCESS that many seconds after its
	// slot time has missed its SLA.
	SuccessWithinSeconds int64 `json:"successWithinSeconds"`
}

// Notification target types.
const NotifyWebhook = "webhook"

// The events a notification target may receive.
const (
	EventFailure             = "failure"             // a slot became FAILURE
	EventSLAMissed           = "slaMissed"           // a slot missed its SLA
	EventWaitTimeout         = "waitTimeout"         // a slot became WAIT_TIMEOUT
	EventSuccessAfterRetries = "successAfterRetries" // a slot succeeded after at least one retry
)

// Events lists every event, in the order the documentation gives them.
var Events = []string{EventFailure, EventSLAMissed, EventWaitTimeout, EventSuccessAfterRetries}

// Notification is a target the scheduler sends a workflow's events to.
type Notification struct {
	// Type is NotifyWebhook.
	Type string `json:"type"`
	// URL is where the webhook POSTs (http or https).
	URL string `json:"url"`
	// SecretFile, if set, is an absolute path on the scheduler host of a
	// file whose content (trailing newlines removed) is the HMAC-SHA256
	// key of the X-Celos-Signature header.
	SecretFile string `json:"secretFile,omitempty"`
	// Events are the events sent to this target (all by default).
	Events []string `json:"events"`
}

// Wants reports whether the target receives event ev.
func (n *Notification) Wants(ev string) bool {
	for _, e := range n.Events {
		if e == ev {
			return true
		}
	}
	return false
}

// MaxPriority bounds a workflow's priority either way.
const MaxPriority = 1000000

var (
	clockPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
	eventPattern = regexp.MustCompile(`^(failure|slaMissed|waitTimeout|successAfterRetries)$`)
)

// validateRun checks the fields of this file; bad is Validate's reporter.
func (w *Workflow) validateRun(bad func(format string, args ...any)) {
	if c := w.Constraints; c != nil {
		if err := c.Validate(); err != nil {
			bad("constraints: %v", err)
		}
	}
	if w.Pool != "" && (!IDPattern.MatchString(w.Pool) || len(w.Pool) > 255) {
		bad("pool %q must match %s", clip(w.Pool), IDPattern)
	}
	if w.Priority < -MaxPriority || w.Priority > MaxPriority {
		bad("priority %d must be between %d and %d", w.Priority, -MaxPriority, MaxPriority)
	}
	if w.SLA != nil && (w.SLA.SuccessWithinSeconds < 1 || w.SLA.SuccessWithinSeconds > MaxTriggerSeconds) {
		bad("sla: successWithinSeconds %d must be between 1 and %d", w.SLA.SuccessWithinSeconds, MaxTriggerSeconds)
	}
	for i := range w.Notify {
		if err := w.Notify[i].Validate(); err != nil {
			bad("notify[%d]: %v", i, err)
		}
	}
}

// Validate checks run constraints.
func (c *Constraints) Validate() error {
	var errs []error
	if tw := c.TimeWindow; tw != nil {
		if err := tw.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("timeWindow: %w", err))
		}
	}
	if c.MinIntervalSeconds < 0 || c.MinIntervalSeconds > MaxTriggerSeconds {
		errs = append(errs, fmt.Errorf("minIntervalSeconds %d must be between 0 and %d", c.MinIntervalSeconds, MaxTriggerSeconds))
	}
	if m := c.MaxRuns; m != nil {
		if m.Count < 1 {
			errs = append(errs, fmt.Errorf("maxRuns: count %d must be at least 1", m.Count))
		}
		if m.PeriodSeconds < 1 || m.PeriodSeconds > MaxTriggerSeconds {
			errs = append(errs, fmt.Errorf("maxRuns: periodSeconds %d must be between 1 and %d", m.PeriodSeconds, MaxTriggerSeconds))
		}
	}
	if c.TimeoutSeconds < 0 || c.TimeoutSeconds > NeverTimeout {
		errs = append(errs, fmt.Errorf("timeoutSeconds %d must be between 0 and %d (never)", c.TimeoutSeconds, NeverTimeout))
	}
	if c.OnTimeout != OnTimeoutGiveUp && c.OnTimeout != OnTimeoutRun {
		errs = append(errs, fmt.Errorf("onTimeout %q must be %q or %q", clip(c.OnTimeout), OnTimeoutGiveUp, OnTimeoutRun))
	}
	return errors.Join(errs...)
}

// Validate checks a time window.
func (tw *TimeWindow) Validate() error {
	for _, v := range []string{tw.From, tw.To} {
		if !clockPattern.MatchString(v) {
			return fmt.Errorf("%q is not a time of day HH:MM between 00:00 and 23:59", clip(v))
		}
	}
	if tw.From == tw.To {
		return fmt.Errorf("from and to are both %s: the window would be empty (leave timeWindow out for all day)", tw.From)
	}
	if _, err := tw.Location(); err != nil {
		return err
	}
	return nil
}

// Minutes returns From and To as minutes after midnight (the window must
// be valid).
func (tw *TimeWindow) Minutes() (from, to int) {
	return clockMinutes(tw.From), clockMinutes(tw.To)
}

func clockMinutes(s string) int {
	if len(s) != 5 {
		return 0
	}
	h, _ := strconv.Atoi(s[:2])
	m, _ := strconv.Atoi(s[3:])
	return h*60 + m
}

// zones caches loaded time zones: the engine asks at every step.
var zones sync.Map // name → *time.Location

// Location returns the window's time zone (UTC when none is named), with
// the rules of Schedule.Location.
func (tw *TimeWindow) Location() (*time.Location, error) {
	if l, ok := zones.Load(tw.TimeZone); ok {
		return l.(*time.Location), nil
	}
	loc, err := (&Schedule{TimeZone: tw.TimeZone}).Location()
	if err != nil {
		return nil, err
	}
	zones.Store(tw.TimeZone, loc)
	return loc, nil
}

// Contains reports whether t is inside the window (its wall-clock time in
// the window's zone, to the minute).
func (tw *TimeWindow) Contains(t time.Time) bool {
	loc, err := tw.Location()
	if err != nil {
		return false
	}
	lt := t.In(loc)
	m := lt.Hour()*60 + lt.Minute()
	from, to := tw.Minutes()
	if from < to {
		return from <= m && m < to
	}
	return m >= from || m < to // crosses midnight
}

// Validate checks a notification target.
func (n *Notification) Validate() error {
	if n.Type != NotifyWebhook {
		return fmt.Errorf("unknown type %q (want %q)", clip(n.Type), NotifyWebhook)
	}
	u, err := url.Parse(n.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q must be an http or https URL with a host", clip(n.URL))
	}
	if n.SecretFile != "" && (!filepath.IsAbs(n.SecretFile) || filepath.Clean(n.SecretFile) != n.SecretFile) {
		return fmt.Errorf("secretFile %q must be a clean absolute path", clip(n.SecretFile))
	}
	if len(n.Events) == 0 {
		return fmt.Errorf("events must name at least one of %v", Events)
	}
	for _, e := range n.Events {
		if !eventPattern.MatchString(e) {
			return fmt.Errorf("unknown event %q (want one of %v)", clip(e), Events)
		}
	}
	return nil
}
