// Package oozie is celos's client for the Oozie Web Services API (v1 and
// v2: submit-and-start, job info, kill, job search, version check) and the
// "oozie" external service that runs workflow slots as Oozie workflow jobs.
//
// The protocol follows Oozie's WebServicesAPI.md and its servlets
// (JsonRestServlet, V1JobServlet, BaseJobsServlet, VersionServlet); the
// facts are gathered in docs/oozie.md.
package oozie

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler/external"
)

// DefaultTimeout bounds every Oozie call whose context has no earlier deadline.
const DefaultTimeout = 30 * time.Second

// maxBody bounds how much of a response is read.
const maxBody = 16 << 20

// Job statuses (WorkflowJob.Status).
const (
	StatusPrep      = "PREP"
	StatusRunning   = "RUNNING"
	StatusSuspended = "SUSPENDED"
	StatusSucceeded = "SUCCEEDED"
	StatusKilled    = "KILLED"
	StatusFailed    = "FAILED"
)

// Authenticator adds credentials to every request. SimpleAuth is Oozie's
// pseudo authentication; SPNEGO is Kerberos (with its cookie jar on the
// http.Client to keep the hadoop.auth cookie).
type Authenticator interface {
	Authenticate(req *http.Request) error
}

// SimpleAuth is Oozie's pseudo/simple authentication: ?user.name=<User> on
// every request.
type SimpleAuth struct{ User string }

// Authenticate adds user.name to the query.
func (a SimpleAuth) Authenticate(req *http.Request) error {
	if a.User == "" {
		return nil
	}
	q := req.URL.Query()
	q.Set("user.name", a.User)
	req.URL.RawQuery = q.Encode()
	return nil
}

// CurrentUser is the OS user name, the user Oozie's own Java client sends
// under simple authentication; "" if unknown.
func CurrentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// codeSafeMode is Oozie's error code for a request refused in safe mode.
const codeSafeMode = "E0002"

// Error is an Oozie call that failed: an HTTP error (with Oozie's
// oozie-error-code and oozie-error-message headers when present), a
// transport failure or an unreadable answer. It wraps
// external.ErrUnavailable when the failure is Oozie's, not the job's:
// unreachable, timing out, 5xx, or garbage.
type Error struct {
	Op     string // submit, info, kill, jobs, versions
	JobID  string // empty for submit, jobs and versions
	URL    string // the Oozie base URL
	Status int    // HTTP status, 0 for a transport failure
	Code   string // oozie-error-code, e.g. E0604
	// Message is oozie-error-message, or the HTTP status text, or the
	// cause of a transport or parse failure.
	Message     string
	Err         error // the transport or parse error, if any
	Unavailable bool
	// NoEffect: the call certainly did nothing: its request did not
	// reach Oozie (a refused connection, a failed version lookup or
	// authentication before it), or Oozie refused it in safe mode
	// (E0002) or as unauthenticated (401); it wraps external.ErrNoEffect.
	NoEffect bool
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "oozie %s: %s", e.URL, e.Op)
	if e.JobID != "" {
		fmt.Fprintf(&b, " job %s", e.JobID)
	}
	b.WriteString(": ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "HTTP %d", e.Status)
		if e.Code != "" {
			fmt.Fprintf(&b, " %s", e.Code)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the cause and, for failures of the service itself,
// external.ErrUnavailable.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Unavailable {
		errs = append(errs, external.ErrUnavailable)
	}
	if e.NoEffect {
		errs = append(errs, external.ErrNoEffect)
	}
	return errs
}

// Client talks to one Oozie server. It is safe for concurrent use.
type Client struct {
	base    string // without a trailing slash, e.g. http://host:11000/oozie
	hc      *http.Client
	auth    Authenticator
	timeout time.Duration

	mu      sync.Mutex
	version string // "v2" or "v1" once known
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client (its Transport is where a SPNEGO
// round tripper, TLS settings or a proxy go). Its own Timeout is left as is.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithAuth sets the Authenticator; the default is SimpleAuth{CurrentUser()}.
func WithAuth(a Authenticator) Option { return func(c *Client) { c.auth = a } }

// WithTimeout bounds each call (DefaultTimeout if not set, none if ≤ 0).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// NewClient returns a client for the Oozie at baseURL
// (http://host:11000/oozie).
func NewClient(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bad Oozie URL %q: want http(s)://host:port/oozie", baseURL)
	}
	c := &Client{
		base:    strings.TrimRight(baseURL, "/"),
		hc:      http.DefaultClient,
		auth:    SimpleAuth{User: CurrentUser()},
		timeout: DefaultTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	if c.version != "" && c.version != "v1" && c.version != "v2" {
		return nil, fmt.Errorf("bad Oozie API version %q: want v1 or v2", c.version)
	}
	return c, nil
}

// URL is the Oozie base URL.
func (c *Client) URL() string { return c.base }

// Versions asks GET /versions which API versions the server speaks.
func (c *Client) Versions(ctx context.Context) ([]int, error) {
	var vs []int
	err := c.do(ctx, call{op: "versions", method: http.MethodGet, path: "/versions", want: http.StatusOK, out: &vs})
	return vs, err
}

// Version returns the API version the client uses, "v2" if the server
// lists it, else "v1" (as OozieClient.validateWSVersion), asking the
// server once.
func (c *Client) Version(ctx context.Context) (string, error) {
	c.mu.Lock()
	v := c.version
	c.mu.Unlock()
	if v != "" {
		return v, nil
	}
	vs, err := c.Versions(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case slices.Contains(vs, 2):
		v = "v2"
	case slices.Contains(vs, 1):
		v = "v1"
	default:
		return "", &Error{Op: "versions", URL: c.base, Message: fmt.Sprintf("the server speaks API versions %v; celos needs v1 or v2", vs)}
	}
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
	return v, nil
}

// Submit submits a workflow job with conf and starts it
// (POST /v?/jobs?action=start) and returns the job id. conf must name the
// application (oozie.wf.application.path).
func (c *Client) Submit(ctx context.Context, conf map[string]string) (string, error) {
	return c.SubmitBy(ctx, conf, time.Time{})
}

// SubmitBy is Submit that sends nothing at or after sendBy (zero: no
// bound): the request is not made, or its body is not sent, once that time
// has passed, also when the process was stopped between the two (the
// check is made again as the body is written); it then fails with an
// Error that is NoEffect (Oozie got no complete request, so it created no
// job).
func (c *Client) SubmitBy(ctx context.Context, conf map[string]string, sendBy time.Time) (string, error) {
	body, err := ConfigurationXML(conf)
	if err != nil {
		return "", err
	}
	if !sendBy.IsZero() && !time.Now().Before(sendBy) {
		return "", &Error{Op: "submit", URL: c.base, Message: notSentMessage(sendBy), Err: errSendTooLate, Unavailable: true, NoEffect: true}
	}
	var out struct {
		ID string `json:"id"`
	}
	err = c.do(ctx, call{
		op: "submit", method: http.MethodPost, versioned: true, path: "/jobs",
		query: url.Values{"action": {"start"}}, body: body, sendBy: sendBy,
		contentType: "application/xml;charset=UTF-8", want: http.StatusCreated, out: &out,
	})
	if err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", &Error{Op: "submit", URL: c.base, Message: "the answer has no job id", Unavailable: true}
	}
	return out.ID, nil
}

// JobInfo returns a workflow job (GET /v?/job/<id>?show=info).
func (c *Client) JobInfo(ctx context.Context, id string) (*Job, error) {
	var j Job
	err := c.do(ctx, call{
		op: "info", job: id, method: http.MethodGet, versioned: true, path: "/job/" + url.PathEscape(id),
		query: url.Values{"show": {"info"}, "timezone": {"GMT"}}, want: http.StatusOK, out: &j,
	})
	if err != nil {
		return nil, err
	}
	if j.Status == "" {
		return nil, &Error{Op: "info", JobID: id, URL: c.base, Message: "the answer has no status", Unavailable: true}
	}
	return &j, nil
}

// Kill kills a job (PUT /v?/job/<id>?action=kill). Oozie answers 200 for a
// job that has already finished.
func (c *Client) Kill(ctx context.Context, id string) error {
	return c.do(ctx, call{
		op: "kill", job: id, method: http.MethodPut, versioned: true, path: "/job/" + url.PathEscape(id),
		query: url.Values{"action": {"kill"}}, want: http.StatusOK,
	})
}

// Filter selects jobs in Jobs: each set field is one Oozie filter term.
type Filter struct {
	Name   string // the workflow application name (appName)
	User   string
	Status string
}

func (f Filter) String() string {
	var terms []string
	add := func(k, v string) {
		if v != "" {
			terms = append(terms, k+"="+v)
		}
	}
	add("name", f.Name)
	add("user", f.User)
	add("status", f.Status)
	return strings.Join(terms, ";")
}

// Jobs lists workflow jobs matching f, newest first, at most len
// (GET /v?/jobs?jobtype=wf&filter=...&offset=1&len=N). Listed jobs carry no
// conf and no actions; ask JobInfo for those.
func (c *Client) Jobs(ctx context.Context, f Filter, max int) ([]Job, error) {
	if max <= 0 {
		max = 50
	}
	q := url.Values{"jobtype": {"wf"}, "offset": {"1"}, "len": {strconv.Itoa(max)}}
	if s := f.String(); s != "" {
		q.Set("filter", s)
	}
	var out struct {
		Workflows []Job `json:"workflows"`
		Total     *int  `json:"total"`
	}
	err := c.do(ctx, call{op: "jobs", method: http.MethodGet, versioned: true, path: "/jobs", query: q, want: http.StatusOK, out: &out})
	if err != nil {
		return nil, err
	}
	if out.Total == nil {
		return nil, &Error{Op: "jobs", URL: c.base, Message: "the answer is not a job list", Unavailable: true}
	}
	return out.Workflows, nil
}

type call struct {
	op          string
	job         string
	method      string
	versioned   bool // path is under /v1 or /v2
	path        string
	query       url.Values
	body        []byte
	sendBy      time.Time // zero, or when the body must not be sent any more (SubmitBy)
	contentType string
	want        int
	out         any
}

func (c *Client) do(ctx context.Context, k call) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	fail := func(e *Error) error {
		e.Op, e.JobID, e.URL = k.op, k.job, c.base
		return e
	}
	path := k.path
	if k.versioned {
		v, err := c.Version(ctx)
		if err != nil {
			var oe *Error
			if errors.As(err, &oe) {
				cp := *oe
				cp.NoEffect = true // the call itself was never made
				return fail(&cp)
			}
			return err
		}
		path = "/" + v + path
	}
	u := c.base + path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	resp, err := c.send(ctx, k, u)
	if err != nil {
		var oe *Error
		if errors.As(err, &oe) {
			return fail(oe)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fail(&Error{Status: resp.StatusCode, Message: "reading the answer: " + err.Error(), Err: err, Unavailable: true})
	}
	if resp.StatusCode != k.want && !(k.want == http.StatusCreated && resp.StatusCode == http.StatusOK) {
		e := &Error{
			Status:      resp.StatusCode,
			Code:        resp.Header.Get("oozie-error-code"),
			Message:     resp.Header.Get("oozie-error-message"),
			Unavailable: resp.StatusCode >= 500,
		}
		// Oozie's own refusal in safe mode, and its authentication
		// filter's 401, come before it acts on the request (a 5xx without
		// the code may be a proxy's, after it).
		e.NoEffect = e.Code == codeSafeMode || resp.StatusCode == http.StatusUnauthorized
		// The real server's message repeats the code ("E0604: Job does
		// not exist [...]"); Error() prints the code once.
		e.Message = strings.TrimPrefix(e.Message, e.Code+": ")
		if e.Message == "" {
			// As OozieClient.handleError: fall back on the status text.
			e.Message = http.StatusText(resp.StatusCode)
			if resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Negotiate") {
				e.Message += " (Oozie wants Kerberos/SPNEGO authentication)"
			}
		}
		return fail(e)
	}
	if k.out == nil {
		return nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "json") {
		return fail(&Error{Status: resp.StatusCode, Message: fmt.Sprintf("the answer is %s, not JSON: %q", ct, snippet(data)), Unavailable: true})
	}
	if err := json.Unmarshal(data, k.out); err != nil {
		return fail(&Error{Status: resp.StatusCode, Message: fmt.Sprintf("unreadable answer %q: %v", snippet(data), err), Err: err, Unavailable: true})
	}
	return nil
}

// send makes the request of k to u, authenticated; an Authenticator that
// is a Reauthenticator may answer a 401 with one more try, or explain a 401
// or 403.
func (c *Client) send(ctx context.Context, k call, u string) (*http.Response, error) {
	newReq := func() (*http.Request, error) {
		var body io.Reader
		if k.body != nil {
			body = bytes.NewReader(k.body)
		}
		req, err := http.NewRequestWithContext(ctx, k.method, u, body)
		if err != nil {
			return nil, &Error{Message: err.Error(), Err: err}
		}
		if k.body != nil && !k.sendBy.IsZero() {
			req.Body = &sendGuard{r: bytes.NewReader(k.body), by: k.sendBy}
			req.GetBody = func() (io.ReadCloser, error) {
				return &sendGuard{r: bytes.NewReader(k.body), by: k.sendBy}, nil
			}
		}
		if k.contentType != "" {
			req.Header.Set("Content-Type", k.contentType)
		}
		req.Header.Set("Accept", "application/json")
		return req, nil
	}
	req, err := newReq()
	if err != nil {
		return nil, err
	}
	if c.auth != nil {
		if err := c.auth.Authenticate(req); err != nil {
			return nil, authError(err)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, transportError(err)
	}
	ra, ok := c.auth.(Reauthenticator)
	if !ok || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, nil
	}
	req, err = newReq()
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	retry, err := ra.Reauthenticate(req, resp)
	if err != nil || !retry {
		if err != nil {
			resp.Body.Close()
			return nil, &Error{Status: resp.StatusCode, Message: err.Error(), Err: err, Unavailable: errors.Is(err, external.ErrUnavailable), NoEffect: true} // refused by authentication, before acting
		}
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if resp, err = c.hc.Do(req); err != nil {
		return nil, transportError(err)
	}
	return resp, nil
}

// errSendTooLate is the error of a request body read (sendGuard) at or
// after its send-by time.
var errSendTooLate = errors.New("send-by time passed")

// sendGuard is a request body that refuses to be read at or after by: the
// transport then abandons the request before its body is sent, so a
// process stopped (SIGSTOP, a frozen VM) between SubmitBy's check and the
// write cannot deliver a submission after its time.
type sendGuard struct {
	r  io.Reader
	by time.Time
}

func (g *sendGuard) Read(p []byte) (int, error) {
	if !time.Now().Before(g.by) {
		return 0, errSendTooLate
	}
	return g.r.Read(p)
}

func (g *sendGuard) Close() error { return nil }

// notSentMessage says why a submission was not sent.
func notSentMessage(sendBy time.Time) string {
	return fmt.Sprintf("not sent: its submit intent expired at %s (the process was held up since it recorded the intent); Oozie got no job", sendBy.UTC().Format(time.RFC3339Nano))
}

func authError(err error) error {
	return &Error{Message: "authenticate: " + err.Error(), Err: err, Unavailable: errors.Is(err, external.ErrUnavailable), NoEffect: true}
}

// transportError is a failed HTTP exchange. Only a failed dial is known
// not to have sent the request; any later failure (a reset, a timeout)
// may come after Oozie received it.
func transportError(err error) error {
	msg := "unreachable: " + err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "no answer in time: " + err.Error()
	}
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	if errors.Is(err, errSendTooLate) {
		// The body was never written: Oozie has an incomplete request.
		return &Error{Message: "submission abandoned before its body was sent: " + err.Error(), Err: err, Unavailable: true, NoEffect: true}
	}
	return &Error{Message: msg, Err: err, Unavailable: true, NoEffect: dial}
}

func snippet(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// ConfigurationXML writes conf as a Hadoop <configuration> document, keys
// sorted.
func ConfigurationXML(conf map[string]string) ([]byte, error) {
	if _, ok := conf[""]; ok {
		return nil, errors.New("oozie configuration: empty property name")
	}
	keys := slices.Sorted(maps.Keys(conf))
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<configuration>\n")
	for _, k := range keys {
		b.WriteString("  <property><name>")
		if err := xml.EscapeText(&b, []byte(k)); err != nil {
			return nil, err
		}
		b.WriteString("</name><value>")
		if err := xml.EscapeText(&b, []byte(conf[k])); err != nil {
			return nil, err
		}
		b.WriteString("</value></property>\n")
	}
	b.WriteString("</configuration>\n")
	return b.Bytes(), nil
}

// ParseConfiguration reads a Hadoop <configuration> document (as Oozie
// returns in a job's conf).
func ParseConfiguration(data []byte) (map[string]string, error) {
	var doc struct {
		XMLName    xml.Name `xml:"configuration"`
		Properties []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("oozie configuration: %w", err)
	}
	conf := make(map[string]string, len(doc.Properties))
	for _, p := range doc.Properties {
		conf[p.Name] = p.Value
	}
	return conf, nil
}
