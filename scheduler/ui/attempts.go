package ui

// The attempts of a slot in its details: every run the external service
// knows of (Options.Attempts), with its times, status and log.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// attemptRow is one attempt as the details show it.
type attemptRow struct {
	N int
	scheduler.Attempt
	// Class is the state class of its badge (s, f, u, k).
	Class    string
	Duration string
	// LogURL opens its log: celos's (a command job) or the service's.
	LogURL  string
	HueLink string
	Last    bool // the slot's current external ID
}

// attemptsView is the attempts section of a slot's details.
type attemptsView struct {
	Wired bool // the server gave the UI an attempt lister
	Rows  []attemptRow
	Err   string
	// Unlisted is the slot's external ID when the service did not list it
	// (an Oozie workflow.xml with a fixed name).
	Unlisted string
}

// attempts lists the attempts of st for its details.
func (h *handler) attempts(ctx context.Context, wf *workflow.Workflow, st slot.State) attemptsView {
	v := attemptsView{Wired: h.opts.Attempts != nil}
	if !v.Wired {
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	as, err := h.opts.Attempts.Attempts(ctx, wf, st.ID)
	if errors.Is(err, scheduler.ErrNoAttempts) {
		v.Wired = false
		return v
	}
	if err != nil {
		v.Err = err.Error()
	}
	found := st.ExternalID == ""
	for i, a := range as {
		r := attemptRow{N: i + 1, Attempt: a, Class: attemptClass(a), Last: a.ExternalID == st.ExternalID && st.ExternalID != ""}
		found = found || r.Last
		if !a.Started.IsZero() && !a.Ended.IsZero() {
			r.Duration = duration(a.Ended.Sub(a.Started))
		} else if !a.Started.IsZero() && a.Running {
			r.Duration = duration(h.opts.Now().Sub(a.Started)) + " so far"
		}
		switch {
		case a.HasLog && h.opts.SlotLog != nil:
			q := url.Values{"id": {wf.ID}, "time": {slot.FormatTime(st.ID.Time)}, "ext": {a.ExternalID}}
			r.LogURL = h.opts.BasePath + "/log?" + q.Encode()
		case a.LogURL != "" && isWebURL(a.LogURL):
			r.LogURL = a.LogURL
		}
		if h.opts.HueURL != "" && wf.ExternalService.Type == workflow.ServiceOozie {
			r.HueLink = h.opts.HueURL + "/oozie/list_oozie_workflow/" + url.PathEscape(a.ExternalID) + "/"
		}
		v.Rows = append(v.Rows, r)
	}
	if !found && v.Err == "" {
		v.Unlisted = st.ExternalID
	}
	return v
}

// isWebURL keeps a service's log link to http and https (a javascript:
// URL from a hostile service must not become a link).
func isWebURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func attemptClass(a scheduler.Attempt) string {
	switch {
	case a.Running:
		return "u"
	case a.Success:
		return "s"
	case a.Status == "killed" || strings.HasPrefix(a.Status, "KILLED"):
		return "k"
	}
	return "f"
}

// duration writes a run's length as a person reads it: 850 ms, 2.1 s,
// 3 min 5 s, 2 h 10 min.
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}

// attemptOf finds an attempt of a slot by its external ID (the log of an
// earlier attempt): only IDs the service lists for this slot are served.
func (h *handler) attemptOf(ctx context.Context, wf *workflow.Workflow, id slot.ID, ext string) (bool, error) {
	if h.opts.Attempts == nil {
		return false, nil
	}
	as, err := h.opts.Attempts.Attempts(ctx, wf, id)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(as, func(a scheduler.Attempt) bool { return a.ExternalID == ext }), nil
}
