package engine

// Where a pending delivery goes: the target it was recorded for, as the
// configuration defines it now. A delivery offered again from the outbox
// (after a stop, a release, a take-over) is posted to the definition the
// deployed workflows give its target — URL, secret file — never to what
// the record alone says, so that a redeploy that re-points or removes a
// target is followed, and a record written by hand in the state directory
// cannot send the server's POST anywhere the configuration does not name.
//
// A workflow's notify targets have no names: a target is known by its URL
// or, when its URL changed, by its place in the list. A record names both
// (targetIndex, and the URLs of the whole list when it was written,
// notifyURLs). The delivery goes to
//
//   - the workflow's target of the record's URL (of several with that URL:
//     the one at the record's place, else the one with the same place
//     among that URL's targets);
//   - failing that, the target at the record's place if its URL is a new
//     one (not in the list when the record was written): the target was
//     re-pointed;
//   - for a workflow no longer deployed, a target of the record's URL that
//     another deployed workflow names (preferring one with the record's
//     secret file): its deliveries still reach a shared endpoint.
//
// Otherwise — the target was removed, it no longer takes the event, the
// workflow is gone and no deployed workflow names the URL — the delivery
// is given up: removed, logged ("notification dropped from the outbox",
// with the reason) and counted (OnDrop). While a workflows file (or the
// directory) does not load, a workflow the configuration does not know
// may be in it: its deliveries wait (errUnknownNow), neither sent nor
// given up, until a scan with everything loaded or the outbox's bounds. A record of the previous version
// (no targetIndex) is known by its URL alone (of several targets with it:
// the one with its secret file and events, else the first).
//
// A record that is not one the engine writes — more than
// maxOutboxRecord bytes, an unknown event, a place outside its list — is
// removed at the first scan that reads it (readOutbox).

import (
	"slices"
	"strconv"
	"strings"

	"github.com/celos-go/celos/schema/workflow"
)

// maxOutboxRecord bounds an outbox record (a register may be up to
// store.MaxRegisterBytes); the engine does not record a delivery whose
// record would be longer (it is sent from memory only, logged), and
// removes a longer one it finds (not one it wrote).
const maxOutboxRecord = 64 << 10

// targetResolver finds the current target of the records of one scan.
type targetResolver struct {
	c *config
	// byURL are the deployed workflows' targets by URL, in the order of
	// the workflows' ids (built at the first record of a workflow not
	// deployed).
	byURL map[string][]workflow.Notification
}

// errUnknownNow is target's answer for a delivery of a workflow the
// configuration does not know while a workflows file (or the directory)
// does not load: the workflow may be in it, so the delivery is neither
// sent nor given up; it waits for a scan with the file loaded (or for the
// outbox's bounds).
const errUnknownNow = "its workflow is not deployed, but a workflows file does not load: it may be there"

// target returns the target rec's delivery goes to now, or why it has
// none (errUnknownNow: none now, perhaps later).
func (r *targetResolver) target(rec outboxRecord) (workflow.Notification, string) {
	if w := r.c.workflows[rec.Workflow]; w != nil {
		return workflowTarget(w, rec)
	}
	if r.byURL == nil {
		r.byURL = make(map[string][]workflow.Notification)
		for _, id := range r.c.ids {
			if w := r.c.workflows[id]; w != nil {
				for _, n := range w.Notify {
					r.byURL[n.URL] = append(r.byURL[n.URL], n)
				}
			}
		}
	}
	named := r.byURL[rec.Target.URL]
	switch {
	case len(named) == 0 && len(r.c.loadErrs) > 0:
		return workflow.Notification{}, errUnknownNow
	case len(named) == 0:
		return workflow.Notification{}, "its workflow is no longer deployed, and no deployed workflow names its target's URL"
	}
	for _, n := range named {
		if n.SecretFile == rec.Target.SecretFile {
			return n, ""
		}
	}
	return named[0], ""
}

// workflowTarget returns the target of deployed workflow w rec's
// delivery goes to, or why it has none (see above).
func workflowTarget(w *workflow.Workflow, rec outboxRecord) (workflow.Notification, string) {
	url := rec.Target.URL
	var same []int // the places of url in w's list
	for i, n := range w.Notify {
		if n.URL == url {
			same = append(same, i)
		}
	}
	pick := -1
	switch {
	case len(same) > 0 && rec.NotifyURLs == nil: // the previous version's record
		pick = same[0]
		for _, i := range same {
			if n := w.Notify[i]; n.SecretFile == rec.Target.SecretFile && slices.Equal(n.Events, rec.Target.Events) {
				pick = i
				break
			}
		}
	case len(same) > 0:
		if slices.Contains(same, rec.TargetIndex) {
			pick = rec.TargetIndex
		} else if nth := countURL(rec.NotifyURLs[:rec.TargetIndex], url); nth < len(same) {
			pick = same[nth]
		}
	case rec.NotifyURLs != nil && rec.TargetIndex < len(w.Notify) && !slices.Contains(rec.NotifyURLs, w.Notify[rec.TargetIndex].URL):
		pick = rec.TargetIndex // re-pointed: a new URL in its place
	}
	if pick < 0 {
		return workflow.Notification{}, "its target is no longer among the workflow's notify targets"
	}
	if n := w.Notify[pick]; n.Wants(rec.Event) {
		return n, ""
	}
	return workflow.Notification{}, "its target (number " + strconv.Itoa(pick+1) + " of the workflow's notify list) no longer takes " + rec.Event + " events"
}

func countURL(urls []string, url string) int {
	n := 0
	for _, u := range urls {
		if u == url {
			n++
		}
	}
	return n
}

// notifyPlaces returns the places in w's notify list of the targets of
// an event of kind (scheduler.Event.Targets: those that want it, in the
// list's order) and the list's URLs; nil, nil if w is nil.
func notifyPlaces(w *workflow.Workflow, kind string) (places []int, urls []string) {
	if w == nil {
		return nil, nil
	}
	urls = make([]string, len(w.Notify))
	for i, n := range w.Notify {
		urls[i] = n.URL
		if n.Wants(kind) {
			places = append(places, i)
		}
	}
	return places, urls
}

// badRecord says why rec, read from the outbox, is not a record the
// engine writes ("" if it is one); raw is its length.
func badRecord(rec outboxRecord, raw int) string {
	switch {
	case raw > maxOutboxRecord:
		return "not an outbox record: " + strconv.Itoa(raw) + " bytes, more than " + strconv.Itoa(maxOutboxRecord)
	case !slices.Contains(workflow.Events, rec.Event):
		return "not an outbox record: its event is not one of " + strings.Join(workflow.Events, ", ")
	case rec.NotifyURLs != nil && (rec.TargetIndex < 0 || rec.TargetIndex >= len(rec.NotifyURLs) || rec.NotifyURLs[rec.TargetIndex] != rec.Target.URL):
		return "not an outbox record: its target's place is not in its notify list"
	}
	return ""
}
