package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
)

// table is every path the API serves, with its methods and parameters.
// openapi.json documents exactly these (openapi_test.go checks both ways).
func (h *Handler) table() []*route {
	id := param{name: "id", kind: kindString, required: true}
	slotTime := param{name: "time", kind: kindTime, required: true}
	bucket := param{name: "bucket", kind: kindString, required: true}
	return []*route{
		{path: "/scheduler", methods: map[string]*endpoint{
			http.MethodPost: {params: []param{{name: "time", kind: kindTime}, {name: "ids", kind: kindList}}, serve: h.scheduler},
		}},
		{path: "/workflow-list", methods: map[string]*endpoint{
			http.MethodGet: {serve: h.workflowList},
		}},
		{path: "/workflow-slots", methods: map[string]*endpoint{
			http.MethodGet: {params: []param{id, {name: "start", kind: kindTime}, {name: "end", kind: kindTime}}, serve: h.workflowSlots},
		}},
		{path: "/workflow", methods: map[string]*endpoint{
			http.MethodGet: {params: []param{id}, serve: h.workflow},
		}},
		{path: "/slot-state", methods: map[string]*endpoint{
			http.MethodGet: {params: []param{id, slotTime}, serve: h.slotState},
		}},
		{path: "/slot-attempts", methods: map[string]*endpoint{
			http.MethodGet: {params: []param{id, slotTime}, serve: h.slotAttempts},
		}},
		{path: "/trigger-status", methods: map[string]*endpoint{
			http.MethodGet: {params: []param{id, slotTime}, serve: h.triggerStatus},
		}},
		{path: "/rerun", methods: map[string]*endpoint{
			http.MethodGet:  {params: []param{id, slotTime}, serve: h.rerunCheck},
			http.MethodPost: {params: []param{id, slotTime}, serve: h.rerun},
		}},
		{path: "/kill", methods: map[string]*endpoint{
			http.MethodPost: {params: []param{id, slotTime}, serve: h.kill},
		}},
		{path: "/pause", methods: map[string]*endpoint{
			http.MethodPost: {params: []param{id, {name: "paused", kind: kindBool, required: true}}, serve: h.pause},
		}},
		{path: "/register", methods: map[string]*endpoint{
			http.MethodGet:    {params: []param{bucket, {name: "key", kind: kindString, required: true}}, serve: h.getRegister},
			http.MethodPut:    {params: []param{bucket, {name: "key", kind: kindString, required: true}}, body: true, serve: h.putRegister},
			http.MethodDelete: {params: []param{bucket, {name: "key", kind: kindString}, {name: "prefix", kind: kindString}}, serve: h.deleteRegister},
		}},
		{path: "/list-register-keys", methods: map[string]*endpoint{
			http.MethodGet: {params: []param{bucket, {name: "prefix", kind: kindString}}, serve: h.listRegisterKeys},
		}},
		{path: "/clear-cache", methods: map[string]*endpoint{
			http.MethodPost: {serve: h.clearCache},
		}},
		{path: "/openapi.json", methods: map[string]*endpoint{
			http.MethodGet: {serve: h.openapi},
		}},
		{path: "/metrics", methods: map[string]*endpoint{
			http.MethodGet: {serve: h.metricsPage},
		}},
		{path: "/healthz", methods: map[string]*endpoint{
			http.MethodGet: {serve: h.healthz},
		}},
		{path: "/version", methods: map[string]*endpoint{
			http.MethodGet: {serve: h.versionPage},
		}},
	}
}

// Slot is a slot in Celos's JSON shape. ExternalID is null before a job exists.
type Slot struct {
	Time       string      `json:"time"`
	Status     slot.Status `json:"status"`
	ExternalID *string     `json:"externalID"`
	RetryCount int         `json:"retryCount"`
}

// NewSlot converts a slot state to its JSON shape.
func NewSlot(s slot.State) Slot {
	out := Slot{Time: slot.FormatTime(s.ID.Time), Status: s.Status, RetryCount: s.RetryCount}
	if s.ExternalID != "" {
		x := s.ExternalID
		out.ExternalID = &x
	}
	return out
}

// WorkflowList is the answer of GET /workflow-list. LoadErrors (not in
// Celos) lists the workflows files that did not load at the last step.
type WorkflowList struct {
	IDs        []string              `json:"ids"`
	LoadErrors []scheduler.LoadError `json:"loadErrors"`
}

// WorkflowSlots is the answer of GET /workflow-slots. Problems (not in
// Celos) are what the engine keeps about the workflow: errors of its
// slots, why READY slots wait (ops "constraint", "pool"), missed SLAs
// ("sla"), a pool that is not defined; absent when there are none.
// Unreadable (not in Celos) are the slots of the range whose stored record
// cannot be read, newest first; absent when there are none. They are not in
// Slots, whose statuses a Celos client knows: a client that reads only
// Slots sees what it always did, a client of this server sees them too.
// Unreadable comes before Slots (appendJSON writes Slots last).
type WorkflowSlots struct {
	Info       WorkflowInfo        `json:"info"`
	Paused     bool                `json:"paused"`
	Problems   []scheduler.Problem `json:"problems,omitempty"`
	Unreadable []UnreadableSlot    `json:"unreadable,omitempty"`
	Slots      []Slot              `json:"slots"`
}

// UnreadableSlot is a slot whose stored record cannot be read (a file that
// does not parse, a directory or FIFO in its place): its time and why,
// naming the record, never its content. POST /rerun or /kill rewrites it.
type UnreadableSlot struct {
	Time  string `json:"time"`
	Error string `json:"error"`
}

// problemLister is implemented by the slot engine (see WorkflowSlots).
type problemLister interface {
	Problems(workflow string) []scheduler.Problem
}

// WorkflowInfo is a workflow's informational fields.
type WorkflowInfo struct {
	URL      *string   `json:"url"`
	Contacts []Contact `json:"contacts"`
}

// Contact is a person responsible for a workflow; a missing part is null.
type Contact struct {
	Name  *string `json:"name"`
	Email *string `json:"email"`
}

// StepResult is the answer of POST /scheduler (Celos answered an empty 200).
// UnknownIDs are the ids given that name no loaded workflow after the
// reload: nothing was stepped for them (Celos ignored them silently).
type StepResult struct {
	Time       string                `json:"time"`
	IDs        []string              `json:"ids,omitempty"`
	UnknownIDs []string              `json:"unknownIDs,omitempty"`
	LoadErrors []scheduler.LoadError `json:"loadErrors"`
}

// PauseResult is the answer of POST /pause.
type PauseResult struct {
	ID     string `json:"id"`
	Paused bool   `json:"paused"`
}

// RegisterKeys is the answer of GET /list-register-keys.
type RegisterKeys struct {
	Keys []string `json:"keys"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (h *Handler) scheduler(w http.ResponseWriter, r *http.Request, q query) error {
	now := q.time("time", h.now())
	ids := q.list("ids")
	for _, id := range ids {
		if err := checkID("ids", id); err != nil {
			return err
		}
	}
	// A client that gives up waiting does not cut the step short.
	if err := h.stepper.Step(context.WithoutCancel(r.Context()), now, ids); err != nil {
		return err
	}
	res := StepResult{Time: slot.FormatTime(now), IDs: ids, LoadErrors: nonNil(h.svc.LoadErrors())}
	if len(ids) > 0 {
		loaded := make(map[string]bool)
		for _, id := range h.svc.WorkflowIDs() {
			loaded[id] = true
		}
		for _, id := range ids {
			if !loaded[id] {
				res.UnknownIDs = append(res.UnknownIDs, id)
			}
		}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (h *Handler) workflowList(w http.ResponseWriter, _ *http.Request, _ query) error {
	writeJSON(w, http.StatusOK, WorkflowList{IDs: nonNil(h.svc.WorkflowIDs()), LoadErrors: nonNil(h.svc.LoadErrors())})
	return nil
}

// workflowSlots answers Celos's /workflow-slots: end defaults to now
// (exclusive), start to max(end − 168h, startTime) (inclusive), newest first.
func (h *Handler) workflowSlots(w http.ResponseWriter, r *http.Request, q query) error {
	id := q.str("id")
	if err := checkID("id", id); err != nil {
		return err
	}
	wf, err := h.svc.Workflow(id)
	if err != nil {
		return err
	}
	end := q.time("end", h.now())
	start := end.Add(-scheduler.Window)
	if start.Before(wf.StartTime) {
		start = wf.StartTime
	}
	if q.has("start") {
		start = q.time("start", start)
		if start.Add(scheduler.Window).Before(end) {
			return badParamf("Time interval between start and end is limited to: %d hours", int(scheduler.Window.Hours()))
		}
	}
	paused, err := h.svc.Paused(id)
	if err != nil {
		return err
	}
	out := WorkflowSlots{Paused: paused}
	if pl, ok := h.svc.(problemLister); ok {
		out.Problems = pl.Problems(id)
	}
	out.Info.URL = nullable(wf.URL)
	out.Info.Contacts = make([]Contact, 0, len(wf.Contacts))
	for _, c := range wf.Contacts {
		out.Info.Contacts = append(out.Info.Contacts, Contact{Name: nullable(c.Name), Email: nullable(c.Email)})
	}
	var listed []scheduler.ListedSlot
	if start.Before(end) {
		if listed, err = h.svc.Slots(r.Context(), id, start, end); err != nil {
			return err
		}
		for _, s := range listed {
			if s.Unreadable != nil {
				out.Unreadable = append(out.Unreadable, UnreadableSlot{Time: slot.FormatTime(s.ID.Time), Error: s.Unreadable.Error()})
			}
		}
	}
	b, err := out.appendJSON(make([]byte, 0, 256+170*len(listed)), listed)
	if err != nil {
		return err
	}
	writeRawJSON(w, http.StatusOK, b)
	return nil
}

// appendJSON writes ws with the slots given as listed, those not
// unreadable (ws.Unreadable has those): the bytes json.MarshalIndent(ws,
// "", "  ") would give with ws.Slots set to them, without reflection (a
// week of minutely slots is 10,080 of them).
func (ws WorkflowSlots) appendJSON(b []byte, listed []scheduler.ListedSlot) ([]byte, error) {
	head, err := json.MarshalIndent(WorkflowSlots{Info: ws.Info, Paused: ws.Paused, Problems: ws.Problems, Unreadable: ws.Unreadable}, "", "  ")
	if err != nil {
		return nil, err
	}
	// head ends with `"slots": null\n}`; replace the null with the list.
	head = bytes.TrimSuffix(head, []byte("null\n}"))
	b = append(b, head...)
	if len(listed) == len(ws.Unreadable) {
		return append(b, "[]\n}\n"...), nil
	}
	b = append(b, "[\n"...)
	first := true
	for i := range listed {
		s := &listed[i]
		if s.Unreadable != nil {
			continue
		}
		if !first {
			b = append(b, ",\n"...)
		}
		first = false
		b = append(b, "    {\n      \"time\": \""...)
		b = s.ID.Time.UTC().AppendFormat(b, slot.TimeFormat)
		b = append(b, "\",\n      \"status\": "...)
		b = appendJSONString(b, string(s.Status))
		b = append(b, ",\n      \"externalID\": "...)
		if s.ExternalID == "" {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, s.ExternalID)
		}
		b = append(b, ",\n      \"retryCount\": "...)
		b = strconv.AppendInt(b, int64(s.RetryCount), 10)
		b = append(b, "\n    }"...)
	}
	return append(b, "\n  ]\n}\n"...), nil
}

// appendJSONString appends s as encoding/json writes a string.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func (h *Handler) workflow(w http.ResponseWriter, _ *http.Request, q query) error {
	id := q.str("id")
	if err := checkID("id", id); err != nil {
		return err
	}
	wf, err := h.svc.Workflow(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wf)
	return nil
}

// slotID reads the id and time parameters.
func slotID(q query) (slot.ID, error) {
	id := q.str("id")
	if err := checkID("id", id); err != nil {
		return slot.ID{}, err
	}
	return slot.ID{Workflow: id, Time: q.time("time", time.Time{})}, nil
}

func (h *Handler) slotState(w http.ResponseWriter, r *http.Request, q query) error {
	id, err := slotID(q)
	if err != nil {
		return err
	}
	st, err := h.svc.SlotState(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewSlot(st))
	return nil
}

// SlotAttempts is the answer of GET /slot-attempts: the slot as it is now
// and every attempt its external service knows of, oldest first.
type SlotAttempts struct {
	Slot     Slot                `json:"slot"`
	Attempts []scheduler.Attempt `json:"attempts"`
}

func (h *Handler) slotAttempts(w http.ResponseWriter, r *http.Request, q query) error {
	id, err := slotID(q)
	if err != nil {
		return err
	}
	wf, err := h.svc.Workflow(id.Workflow)
	if err != nil {
		return err
	}
	slots, err := h.svc.Slots(r.Context(), id.Workflow, id.Time, id.Time.Add(time.Second))
	if err != nil {
		return err
	}
	if len(slots) == 0 || !slots[0].ID.Time.Equal(id.Time) {
		return fmt.Errorf("%w: %s", slot.ErrNotInSchedule, id)
	}
	if err := slots[0].Unreadable; err != nil {
		return err // 409 slot_unreadable
	}
	if h.attempts == nil {
		return fmt.Errorf("%w: GET /slot-attempts", errNotImplemented)
	}
	as, err := h.attempts.Attempts(r.Context(), wf, id)
	if err != nil {
		return err
	}
	if as == nil {
		as = []scheduler.Attempt{}
	}
	writeJSON(w, http.StatusOK, SlotAttempts{Slot: NewSlot(slots[0].State), Attempts: as})
	return nil
}

func (h *Handler) triggerStatus(w http.ResponseWriter, r *http.Request, q query) error {
	id, err := slotID(q)
	if err != nil {
		return err
	}
	st, err := h.svc.TriggerStatus(r.Context(), id, h.now())
	if err != nil {
		return err
	}
	ans := TriggerStatus{Status: withEmptyChildren(st)}
	if pl, ok := h.svc.(problemLister); ok {
		for _, p := range pl.Problems(id.Workflow) {
			if p.Slot.Equal(id.Time) && (p.Op == "constraint" || p.Op == "pool") {
				ans.Held = &Held{Op: p.Op, Reason: p.Error}
			}
		}
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// TriggerStatus is the answer of GET /trigger-status: the trigger's status
// tree (Celos's) and, not in Celos, why a READY slot is held.
type TriggerStatus struct {
	trigger.Status
	Held *Held `json:"held,omitempty"`
}

// Held says why a READY slot is not submitted: a run constraint
// ("constraint") or its full pool ("pool").
type Held struct {
	Op     string `json:"op"`
	Reason string `json:"reason"`
}

// withEmptyChildren makes every subStatuses a list ([] rather than null),
// as Celos writes it.
func withEmptyChildren(s trigger.Status) trigger.Status {
	subs := make([]trigger.Status, len(s.SubStatuses))
	for i, c := range s.SubStatuses {
		subs[i] = withEmptyChildren(c)
	}
	s.SubStatuses = subs
	return s
}

// currentSlot is a slot's state after a change: the stored one, or WAITING
// for a slot with no record (a rerun of a never-stored slot only marks it).
func (h *Handler) currentSlot(r *http.Request, id slot.ID) (Slot, error) {
	st, err := h.svc.SlotState(r.Context(), id)
	if err != nil {
		if !isNotFound(err) {
			return Slot{}, err
		}
		st = slot.NewWaiting(id)
	}
	return NewSlot(st), nil
}

func isNotFound(err error) bool {
	status, _ := errorAnswer(err)
	return status == http.StatusNotFound
}

func (h *Handler) rerun(w http.ResponseWriter, r *http.Request, q query) error {
	id, err := slotID(q)
	if err != nil {
		return err
	}
	if err := h.svc.Rerun(r.Context(), id, h.now()); err != nil {
		return err
	}
	h.metrics.Changed()
	out, err := h.currentSlot(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// rerunCheck answers GET /rerun: whether POST /rerun would accept the
// slot, changing nothing. 200 with the slot as it is; else the error POST
// would answer (400 not due, before startTime or not final; 404; 409).
func (h *Handler) rerunCheck(w http.ResponseWriter, r *http.Request, q query) error {
	id, err := slotID(q)
	if err != nil {
		return err
	}
	rc, ok := h.svc.(scheduler.RerunChecker)
	if !ok {
		return errNotImplemented
	}
	st, err := rc.CheckRerun(r.Context(), id, h.now())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NewSlot(st))
	return nil
}

func (h *Handler) kill(w http.ResponseWriter, r *http.Request, q query) error {
	id, err := slotID(q)
	if err != nil {
		return err
	}
	if err := h.svc.Kill(r.Context(), id); err != nil {
		return err
	}
	h.metrics.Changed()
	out, err := h.currentSlot(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) pause(w http.ResponseWriter, r *http.Request, q query) error {
	id := q.str("id")
	if err := checkID("id", id); err != nil {
		return err
	}
	paused := q.boolean("paused")
	if err := h.svc.SetPaused(r.Context(), id, paused); err != nil {
		return err
	}
	h.metrics.Changed()
	writeJSON(w, http.StatusOK, PauseResult{ID: id, Paused: paused})
	return nil
}

func (h *Handler) getRegister(w http.ResponseWriter, r *http.Request, q query) error {
	v, err := h.svc.GetRegister(r.Context(), q.str("bucket"), q.str("key"))
	if err != nil {
		return err
	}
	if v == nil {
		return fmt.Errorf("%w: bucket %q, key %q", scheduler.ErrRegisterNotFound, q.str("bucket"), q.str("key"))
	}
	writeRawJSON(w, http.StatusOK, append(append([]byte(nil), v...), '\n'))
	return nil
}

func (h *Handler) putRegister(w http.ResponseWriter, r *http.Request, q query) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if isTooLarge(err) {
			return fmt.Errorf("read body: over the limit of %d bytes: %w", MaxBodyBytes, err) // 413
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("read body: %w: not received within the server's read timeout", errBodyTimeout) // 408
		}
		return badParamf("read body: %v", err)
	}
	if err := checkJSONBody(body); err != nil {
		return err
	}
	if err := h.svc.PutRegister(r.Context(), q.str("bucket"), q.str("key"), json.RawMessage(body)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// maxJSONDepth is encoding/json's bound on nested arrays and objects.
const maxJSONDepth = 10000

// checkJSONBody refuses a body that is not one JSON value, saying why
// without quoting it: where it is not UTF-8, where the syntax breaks, or
// that it nests deeper than encoding/json reads.
func checkJSONBody(body []byte) error {
	if !utf8.Valid(body) {
		// JSON is UTF-8 (RFC 8259); json.Valid takes any bytes in a string.
		n := 0
		for n < len(body) {
			r, size := utf8.DecodeRune(body[n:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			n += size
		}
		return badParamf("body is not UTF-8: invalid byte at %d", n)
	}
	if json.Valid(body) {
		return nil
	}
	var v any
	err := json.Unmarshal(body, &v)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se) && strings.HasSuffix(se.Error(), "exceeded max depth"):
		return badParamf("body is nested too deep: at most %d levels of arrays and objects", maxJSONDepth)
	case errors.As(err, &se):
		return badParamf("body is not a JSON value: syntax error at byte %d", se.Offset)
	}
	return badParamf("body is not a JSON value")
}

func (h *Handler) deleteRegister(w http.ResponseWriter, r *http.Request, q query) error {
	bucket, key, prefix := q.str("bucket"), q.str("key"), q.str("prefix")
	var err error
	switch {
	case q.has("key") && q.has("prefix"):
		return badParamf("give key or prefix, not both")
	case q.has("key"):
		err = h.svc.DeleteRegister(r.Context(), bucket, key)
	case q.has("prefix"):
		err = h.svc.DeleteRegistersWithPrefix(r.Context(), bucket, prefix)
	default:
		return badParamf("key or prefix parameter missing.")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (h *Handler) listRegisterKeys(w http.ResponseWriter, r *http.Request, q query) error {
	keys, err := h.svc.RegisterKeys(r.Context(), q.str("bucket"), q.str("prefix"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, RegisterKeys{Keys: nonNil(keys)})
	return nil
}

func (h *Handler) clearCache(w http.ResponseWriter, _ *http.Request, _ query) error {
	if err := h.svc.ClearCache(); err != nil {
		return err
	}
	h.metrics.Changed() // files repaired by hand: the slot counts too
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (h *Handler) openapi(w http.ResponseWriter, _ *http.Request, _ query) error {
	writeRawJSON(w, http.StatusOK, openapiJSON)
	return nil
}

// metricsPage serves the Prometheus handler. Its own error answer (text
// with the collectors' errors) is kept from the client: the error goes to
// ServeHTTP, which answers 500 internal and logs it.
func (h *Handler) metricsPage(w http.ResponseWriter, r *http.Request, _ query) error {
	cw := &errorCatcher{ResponseWriter: w}
	h.metrics.Handler().ServeHTTP(cw, r)
	if cw.status != 0 {
		return fmt.Errorf("serve metrics: %d: %s", cw.status, bytes.TrimSpace(cw.body.Bytes()))
	}
	return nil
}

// errorCatcher passes an answer through unless its status is an error:
// then it keeps the status and body (up to 4 KiB) and writes nothing.
type errorCatcher struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *errorCatcher) WriteHeader(code int) {
	if code >= 400 {
		c.status = code
		return
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *errorCatcher) Write(b []byte) (int, error) {
	if c.status != 0 {
		if room := 4<<10 - c.body.Len(); room > 0 {
			c.body.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Health is the answer of GET /healthz. While a step is in flight it says
// how long the oldest has been running and the bound; past the bound the
// status is "stuck", Error says so and the answer is 503.
type Health struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Code is step_stuck with status stuck (as an error answer's code).
	Code               string   `json:"code,omitempty"`
	StepRunningSeconds *float64 `json:"stepRunningSeconds,omitempty"`
	StepTimeoutSeconds *float64 `json:"stepTimeoutSeconds,omitempty"`
	// Instance is this instance, when several share one database.
	Instance any `json:"instance,omitempty"`
}

// healthz answers 200 while the server is up and no step has been running
// for longer than its bound, else 503.
func (h *Handler) healthz(w http.ResponseWriter, _ *http.Request, _ query) error {
	out := Health{Status: "ok"}
	if h.instance != nil {
		out.Instance = h.instance()
	}
	run, running, ok := h.metrics.OldestStep()
	if !ok {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	secs, bound := running.Seconds(), h.stepTimeout.Seconds()
	out.StepRunningSeconds, out.StepTimeoutSeconds = &secs, &bound
	if running <= h.stepTimeout {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	out.Status, out.Code = "stuck", codeStepStuck
	out.Error = fmt.Sprintf("a scheduler step (time %s) has been running for %s since %s, longer than its bound of %s (--step-timeout)",
		slot.FormatTime(run.At), running.Round(time.Second), slot.FormatTime(run.Started), h.stepTimeout)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusServiceUnavailable, out)
	return nil
}

func (h *Handler) versionPage(w http.ResponseWriter, _ *http.Request, _ query) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, strings.TrimSpace(h.version)+"\n")
	return nil
}
