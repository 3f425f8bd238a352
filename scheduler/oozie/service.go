package oozie

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler/defaults"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// WorkflowNameProperty is the property naming the slot a job runs for,
// "<workflow id>@<pretty slot time>" (Celos's celosWorkflowName). A
// workflow.xml can use it as its name (name="${celosWorkflowName}"), which
// also lets Recover find the job with one query.
const WorkflowNameProperty = "celosWorkflowName"

// recoverScan bounds how many of a user's newest jobs Recover inspects when
// no job carries the slot's name as its application name.
const recoverScan = 50

// clockSkew is how much earlier than the submit intent Recover accepts a
// job's creation time, for the difference between Oozie's clock and ours.
const clockSkew = 10 * time.Second

// Service is the "oozie" external service: it runs a slot as an Oozie
// workflow job. It implements external.Service and external.Recoverer and
// is safe for concurrent use.
type Service struct {
	defaults defaults.Defaults
	hc       *http.Client
	auth     func(user string) Authenticator
	spnego   *SPNEGO // under Kerberos (WithSPNEGO), else nil
	timeout  time.Duration

	mu      sync.Mutex
	clients map[[2]string]*Client // by (URL, user)
}

var (
	_ external.Service   = (*Service)(nil)
	_ external.Recoverer = (*Service)(nil)
)

// ServiceOption configures a Service.
type ServiceOption func(*Service)

// WithCallTimeout bounds each Oozie call (default DefaultTimeout). The
// server keeps the default; tests across packages shorten it.
func WithCallTimeout(d time.Duration) ServiceOption { return func(s *Service) { s.timeout = d } }

// NewService returns the oozie service for an installation: d gives the
// default Oozie URL and properties (nil means none), hc makes the HTTP
// calls (nil means http.DefaultClient).
func NewService(d *defaults.Defaults, hc *http.Client, opts ...ServiceOption) *Service {
	s := &Service{
		hc:      hc,
		auth:    func(u string) Authenticator { return SimpleAuth{User: u} },
		timeout: DefaultTimeout,
		clients: make(map[[2]string]*Client),
	}
	if d != nil {
		s.defaults = *d
	}
	if s.hc == nil {
		s.hc = http.DefaultClient
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// URL is the Oozie URL of w: its own, else the installation default.
func (s *Service) URL(w *workflow.Workflow) (string, error) {
	if u := w.ExternalService.URL; u != "" {
		return u, nil
	}
	if s.defaults.Oozie != "" {
		return s.defaults.Oozie, nil
	}
	return "", fmt.Errorf("workflow %s names no Oozie URL and the installation has no default (CELOS_DEFAULT_OOZIE in --defaults)", w.ID)
}

// Properties returns the job configuration of a slot, as Celos assembles
// it: the installation's default properties, overlaid with the workflow's
// own; ${year} ${month} ${day} ${hour} ${minute} ${second} (and
// ${millisecond}) substituted from the slot time in every value; then year,
// month, day, hour, minute, second and celosWorkflowName set, overriding
// properties of the same names.
func (s *Service) Properties(w *workflow.Workflow, id slot.ID) map[string]string {
	props := maps.Clone(s.defaults.OozieProperties)
	if props == nil {
		props = make(map[string]string)
	}
	maps.Copy(props, w.ExternalService.Properties)
	for k, v := range props {
		props[k] = external.Expand(v, id.Time)
	}
	maps.Copy(props, external.TimeVars(id.Time))
	props[WorkflowNameProperty] = WorkflowName(id)
	return props
}

// WorkflowName is the celosWorkflowName of a slot: "<id>@<pretty time>".
func WorkflowName(id slot.ID) string { return id.Workflow + "@" + PrettyTime(id.Time) }

// PrettyTime writes t as Celos's celosWorkflowName does: UTC, minutes
// always, seconds only when not zero, milliseconds only when not zero
// (2015-09-12T20:00Z, 2015-09-12T12:30:01Z, 2015-09-12T12:30:00.001Z).
func PrettyTime(t time.Time) string {
	t = t.UTC()
	switch {
	case t.Nanosecond()/int(time.Millisecond) != 0:
		return t.Format("2006-01-02T15:04:05.000Z")
	case t.Second() != 0:
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04Z")
}

// user is whom the calls for w authenticate as: the user.name property
// (the workflow's, else the installation default's), else the OS user.
func (s *Service) user(w *workflow.Workflow) string {
	if u := w.ExternalService.Properties["user.name"]; u != "" {
		return u
	}
	if u := s.defaults.OozieProperties["user.name"]; u != "" {
		return u
	}
	return CurrentUser()
}

// client returns the (cached) client for w.
func (s *Service) client(w *workflow.Workflow) (*Client, error) {
	u, err := s.URL(w)
	if err != nil {
		return nil, err
	}
	usr := s.user(w)
	key := [2]string{u, usr}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[key]; ok {
		return c, nil
	}
	c, err := NewClient(u, WithHTTPClient(s.hc), WithAuth(s.auth(usr)), WithTimeout(s.timeout))
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", w.ID, err)
	}
	s.clients[key] = c
	return c, nil
}

// SubmitWindow is how long after its intent a submission may still be
// sent (external.SubmitWindower): the call timeout, the time Recover waits
// for a submission in flight.
func (s *Service) SubmitWindow() time.Duration { return s.timeout }

// Submit submits and starts the slot's workflow job and returns its id.
func (s *Service) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	c, err := s.client(w)
	if err != nil {
		return "", err
	}
	props := s.Properties(w, id)
	if props["user.name"] == "" && s.spnego != nil {
		// Oozie wants user.name in the configuration; under Kerberos it
		// is the principal's (Oozie takes the authenticated user anyway).
		if props["user.name"], err = s.spnego.User(ctx, c.URL()); err != nil {
			// Before any request: nothing can be in flight.
			return "", fmt.Errorf("submit %s: oozie %s: %w", id, c.URL(), errors.Join(err, external.ErrNoEffect))
		}
	}
	// Recover waits for a job of this submission until the intent's time
	// plus the call timeout (notFound): nothing may be sent after that.
	var sendBy time.Time
	if t, ok := external.IntentTime(ctx); ok {
		sendBy = t.Add(s.timeout)
	}
	jobID, err := c.SubmitBy(ctx, props, sendBy)
	if err != nil {
		return "", fmt.Errorf("submit %s: %w", id, err)
	}
	return jobID, nil
}

// Status maps the job's Oozie status: PREP, RUNNING and SUSPENDED are
// running (a suspended job an operator resumes must not be resubmitted),
// SUCCEEDED is success, KILLED and FAILED are failure; any other status
// is an error.
func (s *Service) Status(ctx context.Context, w *workflow.Workflow, externalID string) (external.Status, error) {
	c, err := s.client(w)
	if err != nil {
		return external.Status{}, err
	}
	j, err := c.JobInfo(ctx, externalID)
	if err != nil {
		return external.Status{}, err
	}
	st, err := MapStatus(j.Status)
	if err != nil {
		return external.Status{}, fmt.Errorf("oozie %s: job %s: %w", c.URL(), externalID, err)
	}
	st.Detail = detail(j)
	return st, nil
}

// MapStatus turns an Oozie workflow job status into an external.Status.
func MapStatus(status string) (external.Status, error) {
	switch status {
	case StatusPrep, StatusRunning, StatusSuspended:
		return external.Status{Running: true, Detail: status}, nil
	case StatusSucceeded:
		return external.Status{Success: true, Detail: status}, nil
	case StatusKilled, StatusFailed:
		return external.Status{Detail: status}, nil
	}
	return external.Status{}, fmt.Errorf("unknown Oozie job status %q", status)
}

// detail is the status plus, for a failed job, the first action error.
func detail(j *Job) string {
	if j.Status != StatusFailed && j.Status != StatusKilled {
		return j.Status
	}
	for _, a := range j.Actions {
		if a.ErrorCode != "" || a.ErrorMessage != "" {
			return fmt.Sprintf("%s (action %s: %s %s)", j.Status, a.Name, a.ErrorCode, strings.TrimSpace(a.ErrorMessage))
		}
	}
	return j.Status
}

// Kill kills the job; Oozie answers success for a job already finished.
func (s *Service) Kill(ctx context.Context, w *workflow.Workflow, externalID string) error {
	c, err := s.client(w)
	if err != nil {
		return err
	}
	return c.Kill(ctx, externalID)
}

// Recover finds the newest job created at or after since whose
// celosWorkflowName is the slot's: first by application name
// (GET /jobs?filter=name=<celosWorkflowName>, one call when workflow.xml is
// named "${celosWorkflowName}"), else among the user's newest jobs, whose
// configuration it reads one by one (at most 50).
func (s *Service) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	c, err := s.client(w)
	if err != nil {
		return "", false, err
	}
	name := WorkflowName(id)
	intent := since
	// Oozie dates have whole seconds, and Oozie's clock is not ours.
	since = since.Truncate(time.Second).Add(-clockSkew)
	recent := func(j Job) bool { return j.CreatedTime.IsZero() || !j.CreatedTime.Before(since) }

	jobs, err := c.Jobs(ctx, Filter{Name: name}, recoverScan)
	if err != nil {
		return "", false, fmt.Errorf("recover %s: %w", id, err)
	}
	for _, j := range jobs { // newest first
		if recent(j) {
			return j.ID, true, nil
		}
	}
	usr := s.user(w)
	if s.spnego != nil {
		// Under Kerberos the jobs are the principal's.
		if usr, err = s.spnego.User(ctx, c.URL()); err != nil {
			return "", false, fmt.Errorf("recover %s: oozie %s: %w", id, c.URL(), err)
		}
	}
	jobs, err = c.Jobs(ctx, Filter{User: usr}, recoverScan)
	if err != nil {
		return "", false, fmt.Errorf("recover %s: %w", id, err)
	}
	for _, j := range jobs { // newest first
		if !recent(j) {
			break
		}
		info, err := c.JobInfo(ctx, j.ID)
		if err != nil {
			return "", false, fmt.Errorf("recover %s: %w", id, err)
		}
		conf, err := info.ConfMap()
		if err != nil {
			return "", false, fmt.Errorf("recover %s: job %s: %w", id, j.ID, errors.Join(err, external.ErrUnavailable))
		}
		if conf[WorkflowNameProperty] == name {
			return j.ID, true, nil
		}
	}
	return s.notFound(c, id, intent)
}

// notFound is Recover's answer when Oozie lists no job of slot id: a
// definite "none" once the submission made under the intent of that time
// can no longer be in flight, else an unavailable error. A process killed
// while its submit request was at Oozie (or an instance stopped past its
// lease) leaves the intent; Oozie may still be creating that job when the
// next process looks, and a second submission would run the slot twice.
// The request had the call timeout, so by intent + timeout it has ended
// one way or the other; until then the slot waits, asked again each step.
func (s *Service) notFound(c *Client, id slot.ID, intent time.Time) (string, bool, error) {
	until := intent.Add(s.timeout)
	if time.Now().Before(until) {
		return "", false, fmt.Errorf("recover %s: %w: oozie %s has no job of the submission made at %s yet, and it may still be in flight; the slot is submitted again only after %s, when that request would have timed out",
			id, external.ErrUnavailable, c.URL(), slot.FormatTime(intent), slot.FormatTime(until))
	}
	return "", false, nil
}
