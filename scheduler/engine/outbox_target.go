package engine

// Where a pending delivery goes: the target it was recorded for, as the
// configuration defines it now. A delivery offered again from the outbox
// (after a stop, a release, a take-over) is posted to the definition the
// deployed workflows give its target — URL, secret file — never to what
// the record alone says, so that a redeploy that re-points or removes a
// target is followed, and a record written by hand in the state directory
// cannot send the server's POST anywhere the configuration does not name.
//
// A workflow's notify targets have no names: a target is known by its
// definition, its URL or, when its URL changed, by its place in the list.
// A record names its place (targetIndex) and the whole list when it was
// written (notify; notifyURLs, its URLs). The record's list and the
// workflow's list now are paired (matchTarget), each target at most once:
//
//   - a target unchanged (URL, secret file, events) with one unchanged,
//     wherever it moved: a target of the same URL inserted before it,
//     two of one URL swapped, do not take each other's deliveries;
//   - then one of the same URL and secret file (its events changed);
//   - then one of the same URL (its secret file changed);
//   - failing that, the target at the record's place if its URL is a new
//     one (not in the list when the record was written) and nothing is
//     paired with it: the target was re-pointed;
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
// given up, until a scan with everything loaded or the outbox's bounds.
// A record of round two (notifyURLs without notify) knows the other
// targets of its list by their URLs alone; one of the version before it
// (no targetIndex) knows its own target alone.
//
// A record that is not one the engine writes — more than
// maxOutboxRecord bytes, an unknown event, a place outside its list, a
// notify list that is not its notifyURLs — is
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
// none (errUnknownNow: none now, perhaps later). rebased, for a deployed
// workflow's target whose definition or list changed since rec was
// written, is rec told of the target as it is now (rebase): the record to
// keep, so that a later redeploy is followed from there.
func (r *targetResolver) target(rec outboxRecord) (n workflow.Notification, rebased *outboxRecord, why string) {
	if w := r.c.workflows[rec.Workflow]; w != nil {
		pick, why := workflowTarget(w, rec)
		if why != "" {
			return n, nil, why
		}
		return w.Notify[pick], rebase(w, rec, pick), ""
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
		return n, nil, errUnknownNow
	case len(named) == 0:
		return n, nil, "its workflow is no longer deployed, and no deployed workflow names its target's URL"
	}
	for _, n := range named {
		if n.SecretFile == rec.Target.SecretFile {
			return n, nil, ""
		}
	}
	return named[0], nil, ""
}

// rebase returns rec told of its target at place pick of w's notify list
// as they are now, or nil if rec tells of them already.
func rebase(w *workflow.Workflow, rec outboxRecord, pick int) *outboxRecord {
	if rec.TargetIndex == pick && sameTarget(rec.Target, w.Notify[pick]) && sameList(rec, w) {
		return nil
	}
	_, urls := notifyPlaces(w, rec.Event)
	rec.Target, rec.TargetIndex, rec.NotifyURLs, rec.Notify = w.Notify[pick], pick, urls, w.Notify
	return &rec
}

// sameList reports whether rec was written with w's notify list as it is.
func sameList(rec outboxRecord, w *workflow.Workflow) bool {
	return slices.EqualFunc(rec.Notify, w.Notify, sameTarget) &&
		slices.EqualFunc(rec.NotifyURLs, w.Notify, func(u string, n workflow.Notification) bool { return u == n.URL })
}

// sameTarget reports whether a and b are the same definition.
func sameTarget(a, b workflow.Notification) bool {
	return a.Type == b.Type && a.URL == b.URL && a.SecretFile == b.SecretFile && slices.Equal(a.Events, b.Events)
}

// workflowTarget returns the target of deployed workflow w rec's
// delivery goes to, or why it has none (see above).
func workflowTarget(w *workflow.Workflow, rec outboxRecord) (pick int, why string) {
	i := rec.TargetIndex
	switch {
	case rec.NotifyURLs == nil:
		i = 0 // (the version before's: its own target alone)
		pick = matchTarget(recordedList(rec), w.Notify, i, false)
	case sameList(rec, w) && sameTarget(rec.Target, w.Notify[i]):
		pick = i // (no redeploy since: most records)
	default:
		pick = matchTarget(recordedList(rec), w.Notify, i, true)
	}
	if pick < 0 {
		return -1, "its target is no longer among the workflow's notify targets"
	}
	if n := w.Notify[pick]; n.Wants(rec.Event) {
		return pick, ""
	}
	return -1, "its target (number " + strconv.Itoa(pick+1) + " of the workflow's notify list) no longer takes " + rec.Event + " events"
}

// listedTarget is a target of the notify list a record was written with;
// known is false for one of which the record names the URL alone.
type listedTarget struct {
	n     workflow.Notification
	known bool
}

// recordedList is the notify list rec was written with, as far as rec
// tells it: the whole list (notify); the URLs of the list and its own
// target (a record of round two: notifyURLs); its own target alone (a
// record of the version before, at place 0).
func recordedList(rec outboxRecord) []listedTarget {
	switch {
	case rec.Notify != nil:
		was := make([]listedTarget, len(rec.Notify))
		for i, n := range rec.Notify {
			was[i] = listedTarget{n, true}
		}
		was[rec.TargetIndex] = listedTarget{rec.Target, true} // (its own, as it says)
		return was
	case rec.NotifyURLs != nil:
		was := make([]listedTarget, len(rec.NotifyURLs))
		for i, u := range rec.NotifyURLs {
			was[i] = listedTarget{n: workflow.Notification{URL: u}}
		}
		was[rec.TargetIndex] = listedTarget{rec.Target, true}
		return was
	}
	return []listedTarget{{rec.Target, true}}
}

// matchTarget returns the place in now of the target at place i of was
// (-1: none), pairing the two lists' targets, each at most once, in the
// order of was: first the targets unchanged (URL, secret file, events),
// then those of the same URL and secret file (events changed), then those
// of the same URL (secret changed); failing that, if repoint (was names
// all its URLs), the target at place i in now if its URL was not in was
// and no target of was is paired with it (re-pointed). The same lists
// always pair the same way: two deliveries of one event never go to one
// target while another of its targets gets none.
func matchTarget(was []listedTarget, now []workflow.Notification, i int, repoint bool) int {
	pair := make([]int, len(was))
	for j := range pair {
		pair[j] = -1
	}
	taken := make([]bool, len(now))
	pass := func(same func(o listedTarget, n workflow.Notification) bool) {
		for j, o := range was {
			if pair[j] >= 0 {
				continue
			}
			for k, n := range now {
				if !taken[k] && same(o, n) {
					pair[j], taken[k] = k, true
					break
				}
			}
		}
	}
	pass(func(o listedTarget, n workflow.Notification) bool {
		return o.known && o.n.URL == n.URL && o.n.SecretFile == n.SecretFile && slices.Equal(o.n.Events, n.Events)
	})
	pass(func(o listedTarget, n workflow.Notification) bool {
		return o.known && o.n.URL == n.URL && o.n.SecretFile == n.SecretFile
	})
	pass(func(o listedTarget, n workflow.Notification) bool { return o.n.URL == n.URL })
	if repoint && pair[i] < 0 && i < len(now) && !taken[i] &&
		!slices.ContainsFunc(was, func(o listedTarget) bool { return o.n.URL == now[i].URL }) {
		return i
	}
	return pair[i]
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
	case rec.Notify != nil && !slices.EqualFunc(rec.Notify, rec.NotifyURLs, func(n workflow.Notification, u string) bool { return n.URL == u }):
		return "not an outbox record: its notify list and its list's URLs differ"
	}
	return ""
}
