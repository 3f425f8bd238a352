package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/loop"
	"github.com/celos-go/celos/scheduler/metrics"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// MaxBodyBytes bounds a PUT /register body: the largest value a store
// keeps (store.MaxRegisterBytes).
const MaxBodyBytes = store.MaxRegisterBytes

// Options configure a Handler.
type Options struct {
	// Now is the clock used where a request names no time (default time.Now).
	Now func() time.Time
	// Logger receives one line per changing request, and per step when
	// Stepper is nil (default: discard).
	Logger *slog.Logger
	// Metrics is the Prometheus registry served at /metrics (default: the
	// Stepper's, else a new one).
	Metrics *metrics.Metrics
	// Stepper runs the steps POST /scheduler asks for (the server shares it
	// with its --autoSchedule timer); it must record into Metrics. Default:
	// a stepper of the handler's service with Metrics and Logger.
	Stepper *loop.Stepper
	// Version is what GET /version answers.
	Version string
	// StepTimeout is the bound of a scheduler step: GET /healthz answers
	// 503 while a step has been running for longer (by Now); default
	// DefaultStepTimeout.
	StepTimeout time.Duration
	// Attempts lists every attempt of a slot (GET /slot-attempts): the
	// server's external services (nil: the route answers 501).
	Attempts scheduler.AttemptLister
	// Instance, when set, is what GET /healthz shows of this instance when
	// several share one database (cluster.Status: id, live instances,
	// owned workflows, lease renewals, take-overs; docs/ha.md).
	Instance func() any
}

// DefaultStepTimeout is the default bound of a step: the server's write
// timeout, so a POST /scheduler whose step runs longer could not answer
// anyway. A step's calls to external services and file systems are bounded
// (a minute each, engine.Options.CallTimeout), but a step makes many, and a
// read that ignores its deadline (a FIFO, a hung mount) is not bounded at
// all: this bound is what /healthz reports against.
const DefaultStepTimeout = 10 * time.Minute

// Handler serves the HTTP API over a Service. It is an http.Handler for the
// API paths only; the server mounts other handlers (the UI) beside it.
type Handler struct {
	svc     scheduler.Service
	now     func() time.Time
	log     *slog.Logger
	metrics *metrics.Metrics
	stepper *loop.Stepper
	version string
	routes  map[string]*route
	// stepTimeout is the bound reported by /healthz.
	stepTimeout time.Duration
	attempts    scheduler.AttemptLister
	instance    func() any // Options.Instance
}

// New returns the API handler for svc.
func New(svc scheduler.Service, opts Options) *Handler {
	h := &Handler{svc: svc, now: opts.Now, log: opts.Logger, metrics: opts.Metrics, version: opts.Version}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.metrics == nil && opts.Stepper != nil {
		h.metrics = opts.Stepper.Metrics()
	}
	if h.metrics == nil {
		h.metrics = metrics.New()
	}
	h.stepper = opts.Stepper
	if h.stepper == nil {
		h.stepper = loop.New(svc, loop.Options{Metrics: h.metrics, Logger: h.log})
	}
	if h.version == "" {
		h.version = "devel"
	}
	h.attempts = opts.Attempts
	h.instance = opts.Instance
	h.stepTimeout = opts.StepTimeout
	if h.stepTimeout <= 0 {
		h.stepTimeout = DefaultStepTimeout
	}
	h.metrics.Observe(svc, h.now, h.stepTimeout)
	h.routes = make(map[string]*route)
	for _, r := range h.table() {
		h.routes[r.path] = r
	}
	return h
}

// route is one path and what each method does there. The table in
// routes.go is the single list of paths, methods and parameters; the
// OpenAPI test checks openapi.json against it.
type route struct {
	path    string
	methods map[string]*endpoint
}

// endpoint is one method of a route.
type endpoint struct {
	params []param
	// body is true when the request carries a JSON body (PUT /register).
	body  bool
	serve func(w http.ResponseWriter, r *http.Request, q query) error
}

type paramKind int

const (
	kindString paramKind = iota
	kindTime
	kindBool
	kindList // comma-separated
)

// param is a query parameter an endpoint reads.
type param struct {
	name     string
	kind     paramKind
	required bool
}

func (r *route) allow() string {
	ms := make([]string, 0, len(r.methods))
	for m := range r.methods {
		ms = append(ms, m)
	}
	if _, ok := r.methods[http.MethodGet]; ok {
		ms = append(ms, http.MethodHead)
	}
	sort.Strings(ms)
	return strings.Join(ms, ", ")
}

// ServeHTTP dispatches by exact path, then method.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	label := "other"
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			ref := scheduler.FaultReference()
			h.log.Error("panic in handler", "path", r.URL.Path, "panic", p, "reference", ref)
			if !rw.wrote {
				writeError(rw, http.StatusInternalServerError, internalError(ref))
			}
		}
		h.metrics.Request(label, r.Method, rw.code, time.Since(start))
		// Changes made through the API are logged with who asked (an
		// operator's rerun, kill or pause); steps log themselves.
		if r.Method != http.MethodGet && r.Method != http.MethodHead && label != "/scheduler" {
			h.log.Info("request", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery,
				"status", rw.code, "remote", r.RemoteAddr)
		}
	}()
	rt, ok := h.routes[r.URL.Path]
	if !ok {
		writeError(rw, http.StatusNotFound, errorBody{Error: "no such endpoint: " + r.URL.Path, Code: codeUnknownEndpoint})
		return
	}
	label = rt.path
	ep, ok := rt.methods[r.Method]
	if !ok && r.Method == http.MethodHead {
		// HEAD is GET without the body (net/http drops what is written).
		ep, ok = rt.methods[http.MethodGet]
	}
	if !ok {
		rw.Header().Set("Allow", rt.allow())
		writeError(rw, http.StatusMethodNotAllowed, errorBody{Code: codeMethodNotAllowed,
			Error: fmt.Sprintf("method %s is not supported by %s (allowed: %s)", r.Method, rt.path, rt.allow())})
		return
	}
	q, err := parseQuery(ep, r.URL.RawQuery)
	if err == nil {
		err = ep.serve(rw, r, q)
	}
	if err != nil {
		status, body := errorAnswer(err)
		if status >= 500 {
			args := []any{"method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery, "status", status, "error", err}
			if body.fault {
				ref := scheduler.FaultReference()
				body = faultAnswer(status, ref)
				args = append(args, "reference", ref)
			}
			h.log.Error("request failed", args...)
		}
		if !rw.wrote {
			writeError(rw, status, body)
		}
	}
}

// statusWriter remembers the status code for metrics and whether anything
// was written (so an error after a partial answer is not appended to it).
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.code = code
		s.wrote = true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// badParam is a client error in a request's parameters or body (400).
type badParam struct{ msg string }

func (e *badParam) Error() string { return e.msg }

func badParamf(format string, args ...any) error {
	return &badParam{msg: fmt.Sprintf(format, args...)}
}

// errNotImplemented is an operation the Service does not offer (501).
var errNotImplemented = errors.New("not implemented by this server's service")

// The codes of the error answers the handler and the checks before it
// (Protect) give themselves, not from an error of the service.
const (
	codeBadRequest       = "bad_request"
	codeTooLarge         = "too_large"
	codeTimeout          = "request_timeout"
	codeUnknownEndpoint  = "unknown_endpoint"
	codeMethodNotAllowed = "method_not_allowed"
	codeUnauthorized     = "unauthorized"
	codeCrossSite        = "cross_site"
	codeMisdirected      = "misdirected"
	codeInternal         = "internal"
	codeStepStuck        = "step_stuck"
	codeUnavailable      = "unavailable"
)

// ownCodes are the codes above: with errorKinds', every code an answer
// may carry.
var ownCodes = []string{codeBadRequest, codeTooLarge, codeTimeout, codeUnknownEndpoint, codeMethodNotAllowed,
	codeUnauthorized, codeCrossSite, codeMisdirected, codeInternal, codeStepStuck}

// errorKinds is the one table of the errors the API tells apart: each
// sentinel (errors.Is), the status it is answered with and the stable
// code of the answer (errorBody.Code). The first row that matches wins, so
// a refusal comes before the more general error it also wraps (not_due
// before ErrRerunRefused, not_final before ErrIllegalTransition). Adding a
// code is a row here and its value in the Error schema of openapi.json
// (TestErrorCodesDocumented) and a case in TestErrorCodes. An error no row
// matches is the server's own fault: 500, code internal, and a text that
// hides the error's own (internalError).
var errorKinds = []struct {
	err    error
	status int
	code   string
}{
	{slot.ErrUnknownWorkflow, http.StatusNotFound, "unknown_workflow"},
	{slot.ErrSlotNotFound, http.StatusNotFound, "slot_not_found"},
	{slot.ErrNotInSchedule, http.StatusNotFound, "not_in_schedule"},
	{scheduler.ErrRegisterNotFound, http.StatusNotFound, "register_not_found"},
	{scheduler.ErrReservedBucket, http.StatusForbidden, "reserved_bucket"},
	{scheduler.ErrNotDue, http.StatusBadRequest, "not_due"},
	{scheduler.ErrBeforeStart, http.StatusBadRequest, "before_start"},
	{scheduler.ErrNotFinal, http.StatusBadRequest, "not_final"},
	{slot.ErrIllegalTransition, http.StatusBadRequest, "illegal_transition"},
	{slot.ErrBadParameter, http.StatusBadRequest, codeBadRequest},
	{scheduler.ErrRerunRefused, http.StatusBadRequest, codeBadRequest},
	{scheduler.ErrUnschedulable, http.StatusConflict, "unschedulable"},
	{scheduler.ErrSlotUnreadable, http.StatusConflict, "slot_unreadable"},
	{external.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable},
	{errNotImplemented, http.StatusNotImplemented, "not_implemented"},
	{scheduler.ErrNoAttempts, http.StatusNotImplemented, "not_implemented"},
	{context.Canceled, http.StatusServiceUnavailable, codeUnavailable},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, codeUnavailable},
}

// errorCodes is every code an error answer may carry, sorted (the enum
// of the Error schema in openapi.json).
func errorCodes() []string {
	seen := map[string]bool{}
	for _, c := range ownCodes {
		seen[c] = true
	}
	for _, k := range errorKinds {
		seen[k.code] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// errorAnswer maps an error to its status and answer body: the message is
// err's text, the code and status those of its row in errorKinds. A
// not_due refusal also gives the server's time it was compared with. An
// error of no row is answered 500 with code internal and a text that does
// not show it (internalError, without the reference ServeHTTP adds).
func errorAnswer(err error) (int, errorBody) {
	if bp, ok := errors.AsType[*badParam](err); ok {
		return http.StatusBadRequest, errorBody{Error: bp.msg, Code: codeBadRequest}
	}
	if isTooLarge(err) {
		return http.StatusRequestEntityTooLarge, errorBody{Error: err.Error(), Code: codeTooLarge}
	}
	if errors.Is(err, errBodyTimeout) {
		return http.StatusRequestTimeout, errorBody{Error: err.Error(), Code: codeTimeout}
	}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			b := errorBody{Error: err.Error(), Code: k.code}
			if nd, ok := errors.AsType[*scheduler.NotDueError](err); ok {
				b.ServerTime = slot.FormatTime(nd.ServerTime)
			}
			return k.status, b
		}
	}
	if errors.Is(err, scheduler.ErrStoreUnavailable) || unreachable(err) {
		return http.StatusServiceUnavailable, faultAnswer(http.StatusServiceUnavailable, "")
	}
	return http.StatusInternalServerError, faultAnswer(http.StatusInternalServerError, "")
}

// unreachable reports whether err comes from a network connection that
// could not be made or broke (a *net.OpError or *net.DNSError in its
// chain; not any net.Error, which a bare syscall.Errno such as EIO also
// is): the state database (PostgreSQL) or another service the server
// needs cannot be reached now, which is no fault of the request nor a bug
// of the server.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	_, ok := errors.AsType[*net.DNSError](err)
	return ok
}

// faultAnswer is the answer of an error that is not the request's: a 500
// (internalError), or a 503 when something the server needs cannot be
// reached. Neither answers the error's own text (it may name the state
// database's files or its host and user); the log has it under ref.
func faultAnswer(status int, ref string) errorBody {
	if status != http.StatusServiceUnavailable {
		return internalError(ref)
	}
	msg := "unavailable: a service the server needs (its state database) cannot be reached; its log has the detail"
	if ref != "" {
		msg = "unavailable (reference " + ref + "): a service the server needs (its state database) cannot be reached; its log has the detail under this reference"
	}
	return errorBody{Error: msg, Code: codeUnavailable, fault: true}
}

// internalError is the answer of a 500. The error's own text is not
// answered: an unclassified error may name the state database's files
// ("state database: register /var/lib/celos/db/register/b/k: ...") or
// carry a panic's value; the log has it, under ref, which the answer names
// so that an operator finds the line.
func internalError(ref string) errorBody {
	msg := "internal error: the server could not complete the request; its log has the detail"
	if ref != "" {
		msg = "internal error (reference " + ref + "): the server could not complete the request; its log has the detail under this reference"
	}
	return errorBody{Error: msg, Code: codeInternal, fault: true}
}

// errBodyTimeout is wrapped when a request's body did not arrive within
// the server's read timeout (408).
var errBodyTimeout = errors.New("request body timed out")

// isTooLarge reports whether err is a request body over its limit
// (http.MaxBytesReader).
func isTooLarge(err error) bool {
	_, ok := errors.AsType[*http.MaxBytesError](err)
	return ok
}

// errorBody is every error answer: {"error": "...", "code": "..."}. Error
// is the message for people (its wording may change); Code is what a
// client acts on (errorKinds, ownCodes); ServerTime comes with code
// not_due.
type errorBody struct {
	Error      string `json:"error"`
	Code       string `json:"code"`
	ServerTime string `json:"serverTime,omitempty"`
	// fault marks the answer of an error that is not the request's (a
	// 500, or a 503 of an unreachable database): its text is generic and
	// is given a reference to the logged error.
	fault bool
}

// writeError writes an error answer. Its message is not HTML-escaped
// (<token> stays <token>, not \u003ctoken\u003e): the answer is
// application/json with nosniff, never rendered as HTML.
func writeError(w http.ResponseWriter, status int, body errorBody) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(body); err != nil {
		writeJSON(w, status, body)
		return
	}
	writeRawJSON(w, status, b.Bytes())
}

// writeJSON writes v indented (as Celos, which pretty-printed every answer).
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encode answer: " + err.Error(), Code: codeInternal})
	}
	writeRawJSON(w, code, append(b, '\n'))
}

func writeRawJSON(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// query holds an endpoint's parsed parameters. Reading a parameter the
// endpoint did not declare panics: the declaration is what openapi.json is
// checked against, so it must be complete.
type query struct {
	ep     *endpoint
	values map[string]any
}

func (q query) lookup(name string, kind paramKind) (any, bool) {
	for _, p := range q.ep.params {
		if p.name == name {
			if p.kind != kind {
				panic(fmt.Sprintf("api: parameter %q read with the wrong kind", name))
			}
			v, ok := q.values[name]
			return v, ok
		}
	}
	panic(fmt.Sprintf("api: endpoint reads undeclared parameter %q", name))
}

// str returns a string parameter ("" when absent).
func (q query) str(name string) string {
	v, ok := q.lookup(name, kindString)
	if !ok {
		return ""
	}
	return v.(string)
}

// time returns a time parameter, or def when absent.
func (q query) time(name string, def time.Time) time.Time {
	v, ok := q.lookup(name, kindTime)
	if !ok {
		return def
	}
	return v.(time.Time)
}

// has reports whether a parameter was given.
func (q query) has(name string) bool {
	for _, p := range q.ep.params {
		if p.name == name {
			_, ok := q.values[name]
			return ok
		}
	}
	panic(fmt.Sprintf("api: endpoint reads undeclared parameter %q", name))
}

func (q query) boolean(name string) bool {
	v, ok := q.lookup(name, kindBool)
	return ok && v.(bool)
}

func (q query) list(name string) []string {
	v, ok := q.lookup(name, kindList)
	if !ok {
		return nil
	}
	return v.([]string)
}

// parseQuery checks and converts an endpoint's declared parameters: each at
// most once, required ones present and non-empty, times ISO 8601, booleans
// true or false. Undeclared parameters are ignored, as Celos did.
func parseQuery(ep *endpoint, raw string) (query, error) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return query{}, badParamf("bad query string: %v", err)
	}
	q := query{ep: ep, values: make(map[string]any, len(ep.params))}
	for _, p := range ep.params {
		vs := vals[p.name]
		if len(vs) > 1 {
			return query{}, badParamf("%s parameter given %d times; give it once", p.name, len(vs))
		}
		if len(vs) == 0 || vs[0] == "" {
			if p.required {
				return query{}, badParamf("%s parameter missing.", p.name)
			}
			continue
		}
		s := vs[0]
		switch p.kind {
		case kindString:
			q.values[p.name] = s
		case kindTime:
			t, err := slot.ParseTime(s)
			if err != nil {
				return query{}, badParamf("%s parameter: %v", p.name, err)
			}
			q.values[p.name] = t
		case kindBool:
			if s != "true" && s != "false" {
				return query{}, badParamf("%s parameter must be true or false, not %q", p.name, s)
			}
			q.values[p.name] = s == "true"
		case kindList:
			var items []string
			for _, it := range strings.Split(s, ",") {
				if it = strings.TrimSpace(it); it != "" {
					items = append(items, it)
				}
			}
			q.values[p.name] = items
		}
	}
	return q, nil
}

// checkID rejects what cannot be a workflow id before it reaches the engine.
func checkID(name, id string) error {
	if !workflow.IDPattern.MatchString(id) || id == "." || id == ".." || len(id) > 255 {
		return badParamf("%s parameter %q is not a workflow id (want %s)", name, id, workflow.IDPattern)
	}
	return nil
}
