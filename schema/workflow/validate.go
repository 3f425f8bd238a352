package workflow

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/celos-go/celos/schema/cron"
)

// Validate checks what the JSON types cannot: id syntax and uniqueness,
// cron expressions and time zones, trigger shapes and depth, strategy and
// service fields. It returns every problem found, joined, each naming the
// workflow.
func (p *Project) Validate() error {
	if p.Format != FormatVersion {
		return versionError(p.Format)
	}
	var errs []error
	if p.Project == "" || !IDPattern.MatchString(p.Project) || p.Project == "." || p.Project == ".." {
		errs = append(errs, fmt.Errorf("%w: project name %q must match %s and not be . or ..", ErrInvalid, clip(p.Project), IDPattern))
	}
	seen := make(map[string]bool, len(p.Workflows))
	for i := range p.Workflows {
		w := &p.Workflows[i]
		if seen[w.ID] {
			errs = append(errs, fmt.Errorf("%w %q: duplicate id", ErrInvalid, clip(w.ID)))
		}
		seen[w.ID] = true
		if err := w.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Validate checks one workflow; see Project.Validate.
func (w *Workflow) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w %q: %s", ErrInvalid, clip(w.ID), fmt.Sprintf(format, args...)))
	}
	if !IDPattern.MatchString(w.ID) || w.ID == "." || w.ID == ".." || len(w.ID) > 255 {
		bad("id must match %s, not be . or .., and be at most 255 bytes", IDPattern)
	}
	if err := w.Schedule.Validate(); err != nil {
		bad("schedule: %v", err)
	}
	if err := w.Trigger.Validate(); err != nil {
		bad("trigger: %v", err)
	}
	if w.SchedulingStrategy.Type != StrategySerial {
		bad("schedulingStrategy: unknown type %q (want %q)", clip(w.SchedulingStrategy.Type), StrategySerial)
	} else if w.SchedulingStrategy.Concurrency < 1 {
		bad("schedulingStrategy: concurrency %d must be at least 1", w.SchedulingStrategy.Concurrency)
	}
	if err := w.ExternalService.Validate(); err != nil {
		bad("externalService: %v", err)
	}
	if w.StartTime.IsZero() {
		bad("startTime is missing")
	} else if _, off := w.StartTime.Zone(); off != 0 {
		bad("startTime %s must be in UTC", w.StartTime.Format(time.RFC3339))
	}
	if w.MaxRetryCount < 0 {
		bad("maxRetryCount %d must not be negative", w.MaxRetryCount)
	}
	if w.WaitTimeoutSeconds < 0 || w.WaitTimeoutSeconds > NeverTimeout {
		bad("waitTimeoutSeconds %d must be between 0 and %d (never)", w.WaitTimeoutSeconds, NeverTimeout)
	}
	w.validateRun(bad)
	return errors.Join(errs...)
}

// Location returns the time zone of a cron schedule (UTC when none is named).
func (s *Schedule) Location() (*time.Location, error) {
	if s.TimeZone == "" || s.TimeZone == "UTC" {
		return time.UTC, nil
	}
	if s.TimeZone == "Local" {
		// time.LoadLocation would give the zone of whatever machine reads
		// the document.
		return nil, fmt.Errorf("time zone %q: the zone of the machine is not a schedule's zone; name it (America/New_York, UTC)", clip(s.TimeZone))
	}
	if len(s.TimeZone) > maxQuoted {
		return nil, fmt.Errorf("time zone %q: longer than %d bytes", clip(s.TimeZone), maxQuoted)
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", s.TimeZone, err)
	}
	return loc, nil
}

// Validate checks a schedule.
func (s *Schedule) Validate() error {
	switch s.Type {
	case ScheduleCron:
		if s.Workflow != "" {
			return fmt.Errorf("a cron schedule has no workflow field")
		}
		loc, err := s.Location()
		if err != nil {
			return err
		}
		if len(s.Cron) > maxCron {
			return fmt.Errorf("cron %q: longer than %d bytes", clip(s.Cron), maxCron)
		}
		if _, err := cron.Parse(s.Cron, loc); err != nil {
			return fmt.Errorf("cron %q: %w", s.Cron, err)
		}
	case ScheduleDependent:
		if !IDPattern.MatchString(s.Workflow) {
			return fmt.Errorf("dependent schedule: workflow %q is not a valid id", clip(s.Workflow))
		}
		if s.Cron != "" || s.TimeZone != "" {
			return fmt.Errorf("a dependent schedule has no cron or timeZone field")
		}
	default:
		return fmt.Errorf("unknown type %q (want %q or %q)", clip(s.Type), ScheduleCron, ScheduleDependent)
	}
	return nil
}

// Validate checks a trigger tree.
func (t *Trigger) Validate() error { return t.validate(1) }

func (t *Trigger) validate(depth int) error {
	if depth > MaxTriggerDepth {
		return fmt.Errorf("triggers nest deeper than %d levels", MaxTriggerDepth)
	}
	leaf := func() error {
		if len(t.Triggers) > 0 || t.Trigger != nil {
			return fmt.Errorf("%s trigger has no nested triggers", t.Type)
		}
		return nil
	}
	switch t.Type {
	case TriggerHDFSCheck:
		if t.Path == "" {
			return fmt.Errorf("hdfsCheck trigger needs a path")
		}
		return leaf()
	case TriggerSuccess:
		if !IDPattern.MatchString(t.Workflow) {
			return fmt.Errorf("success trigger: workflow %q is not a valid id", clip(t.Workflow))
		}
		return leaf()
	case TriggerAlways:
		return leaf()
	case TriggerDelay:
		if t.Seconds < 0 || t.Seconds > MaxTriggerSeconds {
			return fmt.Errorf("delay trigger: seconds %d must be between 0 and %d (100 years)", t.Seconds, MaxTriggerSeconds)
		}
		return leaf()
	case TriggerAnd, TriggerOr:
		if t.Trigger != nil {
			return fmt.Errorf("%s trigger takes \"triggers\", not \"trigger\"", t.Type)
		}
		for i := range t.Triggers {
			if err := t.Triggers[i].validate(depth + 1); err != nil {
				return fmt.Errorf("%s[%d]: %w", t.Type, i, err)
			}
		}
		return nil
	case TriggerNot, TriggerOffset:
		if t.Type == TriggerOffset && (t.Seconds < -MaxTriggerSeconds || t.Seconds > MaxTriggerSeconds) {
			return fmt.Errorf("offset trigger: seconds %d must be between -%d and %d (100 years)", t.Seconds, MaxTriggerSeconds, MaxTriggerSeconds)
		}
		if t.Trigger == nil || len(t.Triggers) > 0 {
			return fmt.Errorf("%s trigger needs exactly one nested \"trigger\"", t.Type)
		}
		if err := t.Trigger.validate(depth + 1); err != nil {
			return fmt.Errorf("%s: %w", t.Type, err)
		}
		return nil
	default:
		if known, err := t.validateNew(); known {
			return err
		}
		return fmt.Errorf("unknown trigger type %q", clip(t.Type))
	}
}

// Validate checks an external service.
func (s *ExternalService) Validate() error {
	switch s.Type {
	case ServiceOozie:
		if len(s.Command) > 0 || len(s.Env) > 0 || s.Dir != "" || s.TimeoutSeconds != 0 {
			return fmt.Errorf("oozie service takes only properties and url")
		}
	case ServiceCommand:
		if len(s.Command) == 0 || s.Command[0] == "" {
			return fmt.Errorf("command service needs a non-empty command")
		}
		if len(s.Properties) > 0 || s.URL != "" {
			return fmt.Errorf("command service takes no properties or url")
		}
		if s.TimeoutSeconds < 0 || s.TimeoutSeconds > NeverTimeout {
			// Beyond, the timeout as a time.Duration would overflow.
			return fmt.Errorf("timeoutSeconds %d must be between 0 and %d", s.TimeoutSeconds, NeverTimeout)
		}
	default:
		return fmt.Errorf("unknown type %q (want %q or %q)", clip(s.Type), ServiceOozie, ServiceCommand)
	}
	return nil
}

// maxQuoted bounds what a validation error quotes of a value, and the
// length of a time zone name; maxCron the length of a cron expression.
const (
	maxQuoted = 64
	maxCron   = 1024
)

// clip shortens a value an error quotes to maxQuoted bytes (a document of
// 64 MiB must not make an error of 64 MiB on /workflow-list).
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(s[:maxQuoted], ""), len(s))
}

// ValidateProjectName refuses project names that are not a single safe
// path element: celos deploy makes the name a file name (NAME.json) and an
// HDFS directory name (HDFS_ROOT/NAME), and celos init a CUE package.
func ValidateProjectName(name string) error {
	switch {
	case name == "":
		return errors.New("project name is empty (pass --project NAME)")
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("project name %q contains a NUL byte", name)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("project name %q contains a path separator", name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("project name %q contains \"..\"", name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("project name %q starts with a dot", name)
	case len(name) > 200:
		return fmt.Errorf("project name %q is longer than 200 bytes", name)
	case !IDPattern.MatchString(name):
		return fmt.Errorf("project name %q may contain only letters, digits, '.', '_' and '-'", name)
	}
	return nil
}
