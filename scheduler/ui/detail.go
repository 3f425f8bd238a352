package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// Limits of the detail views.
const (
	// maxListedSlots bounds the slot list of a range (the actions still
	// cover every slot of the range).
	maxListedSlots = 500
	// logTail is how much of a log the details show (the log link serves
	// all of it, up to maxLog).
	logTail = 32 << 10
	maxLog  = 16 << 20
)

// pageCommon is what every page's layout needs.
type pageCommon struct {
	Title         string
	PageTitle     string
	Base          string
	APIBase       string
	Static        string // prefix of asset URLs
	AssetVersion  string
	TokenRequired bool
	Version       string
	Instance      string
	Fragment      bool
}

func (h *handler) common(pageTitle string) pageCommon {
	return pageCommon{
		Title:         h.opts.Title,
		PageTitle:     pageTitle,
		Base:          h.opts.BasePath,
		APIBase:       h.opts.APIBase,
		Static:        h.opts.BasePath + "/static/",
		AssetVersion:  h.assetVersion,
		TokenRequired: h.opts.TokenRequired,
		Version:       h.opts.Version,
		Instance:      h.opts.Instance,
	}
}

// slotView is the details of one slot.
type slotView struct {
	pageCommon
	Workflow     string
	WF           *workflow.Workflow
	State        slot.State
	Style        *statusStyle
	Now          time.Time
	TimeISO      string
	HueLink      string
	WaitDeadline time.Time
	WaitNever    bool
	Paused       bool
	Trigger      *trigger.Status
	TriggerErr   string
	LogEnabled   bool // the workflow runs local commands
	LogWired     bool // the server gave the UI access to logs
	Log          string
	LogTruncated bool
	LogErr       string
	LogURL       string
	CanRerun     bool
	CanKill      bool
	Problems     []scheduler.Problem
	Attempts     attemptsView
	// Bucket is set when the slot was opened from a bucket of the grid.
	BucketStart, BucketEnd time.Time
}

// rangeView is the details of several slots of one workflow: a bucket
// holding more than one, or a range the operator selected.
type rangeView struct {
	pageCommon
	Workflow   string
	Start, End time.Time
	Now        time.Time
	Paused     bool
	Total      int
	Counts     []countItem
	Slots      []slotRow
	More       int // slots not listed
	Rerun      []string
	RerunFail  []string
	Kill       []string
}

type countItem struct {
	Style *statusStyle
	N     int
}

type slotRow struct {
	State slot.State
	Style *statusStyle
	ISO   string
}

func (h *handler) fragment(r *http.Request) bool { return r.URL.Query().Get("f") == "1" }

// slotParams reads id and either time or start/end.
func slotParams(q url.Values) (id string, t, start, end time.Time, single bool, err error) {
	for k, v := range q {
		if len(v) > 1 {
			return "", t, start, end, false, fmt.Errorf("parameter %s given %d times", k, len(v))
		}
	}
	id = q.Get("id")
	if id == "" {
		return "", t, start, end, false, errors.New("id parameter missing")
	}
	if s := q.Get("time"); s != "" {
		t, err = slot.ParseTime(s)
		if err != nil {
			return "", t, start, end, false, fmt.Errorf("time: %v", err)
		}
		return id, t, t, t.Add(time.Second), true, nil
	}
	if q.Get("start") == "" || q.Get("end") == "" {
		return "", t, start, end, false, errors.New("want time, or start and end")
	}
	if start, err = slot.ParseTime(q.Get("start")); err != nil {
		return "", t, start, end, false, fmt.Errorf("start: %v", err)
	}
	if end, err = slot.ParseTime(q.Get("end")); err != nil {
		return "", t, start, end, false, fmt.Errorf("end: %v", err)
	}
	if !start.Before(end) {
		return "", t, start, end, false, errors.New("start must be before end")
	}
	if end.Sub(start) > scheduler.Window {
		return "", t, start, end, false, fmt.Errorf("a range is limited to %v", scheduler.Window)
	}
	return id, t, start, end, false, nil
}

func (h *handler) serveSlot(w http.ResponseWriter, r *http.Request) {
	id, _, start, end, single, err := slotParams(r.URL.Query())
	if err != nil {
		h.httpError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	wf, err := h.svc.Workflow(id)
	if err != nil {
		h.serviceError(w, r, err)
		return
	}
	slots, err := h.svc.Slots(ctx, id, start, end)
	if err != nil {
		h.serviceError(w, r, err)
		return
	}
	now := h.opts.Now().UTC()
	paused, _ := h.svc.Paused(id)
	if single && len(slots) == 0 {
		h.noSlot(w, r, slot.ID{Workflow: id, Time: start})
		return
	}
	if len(slots) == 1 && slots[0].Unreadable != nil {
		h.unreadableSlot(w, r, slots[0], paused)
		return
	}
	if len(slots) == 1 {
		v := h.slotView(ctx, wf, slots[0].State, now, paused)
		v.Fragment = h.fragment(r)
		if !single {
			v.BucketStart, v.BucketEnd = start, end
		}
		h.render(w, r, "slot.html", v)
		return
	}
	v := &rangeView{
		pageCommon: h.common(id),
		Workflow:   id, Start: start, End: end, Now: now, Paused: paused,
		Total: len(slots),
	}
	v.Fragment = h.fragment(r)
	counts := map[slot.Status]int{}
	unreadable := 0
	for i := range slots {
		s := &slots[i]
		iso := slot.FormatTime(s.ID.Time)
		if s.Unreadable != nil {
			// A rerun rewrites its record (refused while a job of the
			// slot runs: the answer says so).
			unreadable++
			v.Rerun = append(v.Rerun, iso)
			v.RerunFail = append(v.RerunFail, iso)
		} else if counts[s.Status]++; s.Status.Final() {
			v.Rerun = append(v.Rerun, iso)
			if s.Status.Type() == slot.TypeFailure {
				v.RerunFail = append(v.RerunFail, iso)
			}
		} else {
			v.Kill = append(v.Kill, iso)
		}
		if len(v.Slots) < maxListedSlots {
			v.Slots = append(v.Slots, slotRow{State: s.State, Style: listedStyle(s), ISO: iso})
		} else {
			v.More++
		}
	}
	if unreadable > 0 {
		v.Counts = append(v.Counts, countItem{Style: &unreadableStyle, N: unreadable})
	}
	for i := len(styles) - 1; i >= 0; i-- {
		if n := counts[styles[i].Status]; n > 0 {
			v.Counts = append(v.Counts, countItem{Style: &styles[i], N: n})
		}
	}
	h.render(w, r, "range.html", v)
}

// unreadableView is the details of one slot whose record cannot be read:
// why (the 409 of /slot-state, naming the record), and the actions that
// rewrite the record.
type unreadableView struct {
	pageCommon
	Workflow string
	Time     time.Time
	TimeISO  string
	Style    *statusStyle
	Paused   bool
	CanRerun bool
	CanKill  bool
	Code     int
	Status   string
	Message  string
}

// unreadableSlot answers the details of a slot whose record cannot be
// read: 409 with the error, as /slot-state does, and the buttons of a
// slot's details. Both actions are offered: the state that would choose
// between them is what cannot be read, and the server refuses the one
// that does not apply (a rerun while the slot's job runs; either while a
// directory holding files is in the record's place), saying why.
func (h *handler) unreadableSlot(w http.ResponseWriter, r *http.Request, s scheduler.ListedSlot, paused bool) {
	v := &unreadableView{
		pageCommon: h.common(s.ID.String()),
		Workflow:   s.ID.Workflow,
		Time:       s.ID.Time,
		TimeISO:    slot.FormatTime(s.ID.Time),
		Style:      &unreadableStyle,
		Paused:     paused,
		CanRerun:   true,
		CanKill:    true,
		Code:       http.StatusConflict,
		Status:     http.StatusText(http.StatusConflict),
		Message:    s.Unreadable.Error(),
	}
	v.Fragment = h.fragment(r)
	h.renderStatus(w, r, http.StatusConflict, "unreadable.html", v)
}

func (h *handler) slotView(ctx context.Context, wf *workflow.Workflow, st slot.State, now time.Time, paused bool) *slotView {
	v := &slotView{
		pageCommon: h.common(st.ID.String()),
		Workflow:   wf.ID,
		WF:         wf,
		State:      st,
		Style:      styleOf(st.Status),
		Now:        now,
		TimeISO:    slot.FormatTime(st.ID.Time),
		Paused:     paused,
		CanRerun:   st.Status.Final(),
		CanKill:    !st.Status.Final(),
		LogEnabled: wf.ExternalService.Type == workflow.ServiceCommand,
		LogWired:   h.opts.SlotLog != nil,
	}
	for _, p := range h.problems(wf.ID) {
		if p.Slot.Equal(st.ID.Time) {
			v.Problems = append(v.Problems, p)
		}
	}
	if wf.WaitTimeoutSeconds >= workflow.NeverTimeout || wf.WaitTimeoutSeconds < 0 {
		v.WaitNever = true
	} else {
		v.WaitDeadline = st.ID.Time.Add(time.Duration(wf.WaitTimeoutSeconds) * time.Second)
	}
	if h.opts.HueURL != "" && st.ExternalID != "" && wf.ExternalService.Type == workflow.ServiceOozie {
		v.HueLink = h.opts.HueURL + "/oozie/list_oozie_workflow/" + url.PathEscape(st.ExternalID) + "/"
	}
	// The trigger tree and the log are read concurrently: either may be slow
	// (an HDFS NameNode, a large file).
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ts, err := h.svc.TriggerStatus(tctx, st.ID, now)
		if err != nil {
			v.TriggerErr = err.Error()
			return
		}
		v.Trigger = &ts
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		v.Attempts = h.attempts(ctx, wf, st)
	}()
	if v.LogEnabled && v.LogWired {
		q := url.Values{"id": {wf.ID}, "time": {v.TimeISO}}
		v.LogURL = h.opts.BasePath + "/log?" + q.Encode()
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.Log, v.LogTruncated, v.LogErr = h.readLogTail(ctx, wf, st)
		}()
	}
	wg.Wait()
	return v
}

func (h *handler) readLogTail(ctx context.Context, wf *workflow.Workflow, st slot.State) (string, bool, string) {
	rc, err := h.opts.SlotLog(ctx, wf, st)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, "no log yet"
	}
	if err != nil {
		return "", false, err.Error()
	}
	defer rc.Close()
	var truncated bool
	if s, ok := rc.(io.Seeker); ok {
		if size, err := s.Seek(0, io.SeekEnd); err == nil {
			off := max(0, size-logTail)
			truncated = off > 0
			if _, err := s.Seek(off, io.SeekStart); err != nil {
				return "", false, err.Error()
			}
		}
	}
	// Without Seek, keep the last logTail bytes of a bounded read.
	data, err := io.ReadAll(io.LimitReader(rc, maxLog))
	if err != nil {
		return "", false, err.Error()
	}
	if len(data) > logTail {
		data, truncated = data[len(data)-logTail:], true
	}
	if truncated {
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i < 200 {
			data = data[i+1:]
		}
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), truncated, ""
}

func (h *handler) serveLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ext := q.Get("ext")
	q.Del("ext")
	id, t, _, _, single, err := slotParams(q)
	if err == nil && !single {
		err = errors.New("want id and time")
	}
	if err != nil {
		h.httpError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if h.opts.SlotLog == nil {
		h.httpError(w, r, http.StatusNotFound, "this server gives the UI no access to logs")
		return
	}
	wf, err := h.svc.Workflow(id)
	if err != nil {
		h.serviceError(w, r, err)
		return
	}
	slots, err := h.svc.Slots(r.Context(), id, t, t.Add(time.Second))
	if err != nil {
		h.serviceError(w, r, err)
		return
	}
	if len(slots) == 0 {
		sid := slot.ID{Workflow: id, Time: t}
		if _, err := h.svc.SlotState(r.Context(), sid); errors.Is(err, scheduler.ErrSlotUnreadable) {
			h.unreadableLog(w, r, sid, err)
			return
		}
		h.noSlot(w, r, sid)
		return
	}
	if err := slots[0].Unreadable; err != nil {
		h.unreadableLog(w, r, slots[0].ID, err)
		return
	}
	st := slots[0].State
	if ext != "" && ext != st.ExternalID {
		// An earlier attempt: only one the service lists for this slot.
		ok, err := h.attemptOf(r.Context(), wf, st.ID, ext)
		if err != nil {
			h.httpError(w, r, http.StatusServiceUnavailable, "list the attempts of "+st.ID.String()+": "+err.Error())
			return
		}
		if !ok {
			h.httpError(w, r, http.StatusNotFound, fmt.Sprintf("%s is not an attempt of %s", ext, st.ID))
			return
		}
		st.ExternalID = ext
	}
	rc, err := h.opts.SlotLog(r.Context(), wf, st)
	if errors.Is(err, fs.ErrNotExist) {
		h.httpError(w, r, http.StatusNotFound, "no log for "+st.ID.String())
		return
	}
	if err != nil {
		h.httpError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.Copy(w, io.LimitReader(rc, maxLog))
}

// unreadableLogView is the log page of a slot whose record cannot be
// read.
type unreadableLogView struct {
	pageCommon
	Slot, Workflow, TimeISO string
	Code                    int
	Status, Message         string
}

// unreadableLog answers the log page of slot id, whose record cannot be
// read (err): which job's log to show is what cannot be read. A page of
// the UI's layout, 409 as the API's /slot-state, naming the slot and why
// (the record), and linking to the slot's details, whose Rerun and Kill
// rewrite the record.
func (h *handler) unreadableLog(w http.ResponseWriter, r *http.Request, id slot.ID, err error) {
	v := &unreadableLogView{
		pageCommon: h.common("Log of " + id.String()),
		Slot:       id.String(),
		Workflow:   id.Workflow,
		TimeISO:    slot.FormatTime(id.Time),
		Code:       http.StatusConflict,
		Status:     http.StatusText(http.StatusConflict),
		Message:    err.Error(),
	}
	h.renderStatus(w, r, http.StatusConflict, "unreadablelog.html", v)
}

// workflowView is the details of a workflow (its row header).
type workflowView struct {
	pageCommon
	Problems   []scheduler.Problem
	WF         *workflow.Workflow
	Paused     bool
	Definition string
	Now        time.Time
}

func (h *handler) serveWorkflow(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("id")
	if id == "" || len(q["id"]) > 1 {
		h.httpError(w, r, http.StatusBadRequest, "id parameter missing")
		return
	}
	wf, err := h.svc.Workflow(id)
	if err != nil {
		h.serviceError(w, r, err)
		return
	}
	paused, _ := h.svc.Paused(id)
	def, _ := json.MarshalIndent(wf, "", "  ")
	v := &workflowView{pageCommon: h.common(id), WF: wf, Paused: paused, Definition: string(def), Now: h.opts.Now().UTC(), Problems: h.problems(id)}
	v.Fragment = h.fragment(r)
	h.render(w, r, "workflow.html", v)
}

// serviceError maps the engine's sentinel errors to statuses.
// noSlot answers a request for slot id that the service's Slots did not
// return: 409 with the service's error when the slot's stored record
// cannot be read (Slots leaves such slots out), else 404.
func (h *handler) noSlot(w http.ResponseWriter, r *http.Request, id slot.ID) {
	if _, err := h.svc.SlotState(r.Context(), id); errors.Is(err, scheduler.ErrSlotUnreadable) {
		h.httpError(w, r, http.StatusConflict, err.Error())
		return
	}
	h.httpError(w, r, http.StatusNotFound, fmt.Sprintf("%s has no slot at %s", id.Workflow, slot.FormatTime(id.Time)))
}

func (h *handler) serviceError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, scheduler.ErrSlotUnreadable):
		h.httpError(w, r, http.StatusConflict, err.Error())
	case errors.Is(err, slot.ErrUnknownWorkflow), errors.Is(err, slot.ErrSlotNotFound), errors.Is(err, slot.ErrNotInSchedule):
		h.httpError(w, r, http.StatusNotFound, err.Error())
	case errors.Is(err, slot.ErrBadParameter), errors.Is(err, slot.ErrIllegalTransition):
		h.httpError(w, r, http.StatusBadRequest, err.Error())
	default:
		h.httpError(w, r, http.StatusInternalServerError, err.Error())
	}
}

type errorView struct {
	pageCommon
	Code    int
	Status  string
	Message string
}

func (h *handler) httpError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if code >= http.StatusInternalServerError {
		// The server's own fault: its detail (often a path of the
		// server's files) goes to the log, the page names a reference.
		ref := scheduler.FaultReference()
		h.opts.Logger.Error("ui request failed", "path", r.URL.Path, "query", r.URL.RawQuery, "status", code, "error", msg, "reference", ref)
		msg = "internal error (reference " + ref + "): the server could not complete the page; its log has the detail under this reference"
	}
	v := &errorView{pageCommon: h.common(http.StatusText(code)), Code: code, Status: http.StatusText(code), Message: msg}
	v.Fragment = h.fragment(r)
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, "error.html", v); err != nil {
		http.Error(w, msg, code)
		return
	}
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render executes a template into a buffer (so a template error is a clean
// 500, not half a page) and sends it.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	h.renderStatus(w, r, http.StatusOK, name, data)
}

// renderStatus is render with another status code than 200.
func (h *handler) renderStatus(w http.ResponseWriter, r *http.Request, code int, name string, data any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() < 64<<20 {
			bufPool.Put(buf)
		}
	}()
	if err := h.tmpl.ExecuteTemplate(buf, name, data); err != nil {
		h.httpError(w, r, http.StatusInternalServerError, "render "+name+": "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	h.write(w, r, code, buf.Bytes())
}

func (h *handler) funcs() template.FuncMap {
	return template.FuncMap{
		"utc": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
		},
		"utcShort": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
		"iso":      func(t time.Time) string { return slot.FormatTime(t) },
		"rel":      relative,
		"join":     strings.Join,
		"seconds":  humanSeconds,
		"inc":      func(i int) int { return i + 1 },
		"plural": func(n int, one, many string) string {
			if n == 1 {
				return one
			}
			return many
		},
		"triggerType": triggerName,
	}
}

// relative says how far t is from now: "3 h ago", "in 5 min".
func relative(t, now time.Time) string {
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%.1f h", d.Hours())
		s = strings.Replace(s, ".0 ", " ", 1)
	default:
		s = fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	if suffix == "" {
		return "in " + s
	}
	return s + suffix
}

func humanSeconds(s int64) string {
	d := time.Duration(s) * time.Second
	switch {
	case s%86400 == 0 && s != 0:
		return fmt.Sprintf("%d d", s/86400)
	case s%3600 == 0 && s != 0:
		return fmt.Sprintf("%d h", s/3600)
	case s%60 == 0 && s != 0:
		return fmt.Sprintf("%d min", s/60)
	}
	return d.String()
}

// triggerName turns Celos's class names into the CUE names authors write.
func triggerName(t string) string {
	switch t {
	case "HDFSCheckTrigger":
		return "hdfsCheck"
	case "SuccessTrigger":
		return "success"
	case "AndTrigger":
		return "and"
	case "OrTrigger":
		return "or"
	case "NotTrigger":
		return "not"
	case "OffsetTrigger":
		return "offset"
	case "DelayTrigger":
		return "delay"
	case "AlwaysTrigger":
		return "always"
	case "DataVolumeTrigger":
		return "dataVolume"
	case "FailureTrigger":
		return "failure"
	case "SinceLastTrigger":
		return "sinceLast"
	case "EventTrigger":
		return "event"
	}
	return t
}
