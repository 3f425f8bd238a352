package engine

// The SLA misses sent, recorded in the store so that each is sent once
// across restarts and take-overs: one register per miss in the bucket
// slaBucket (statedb's register/, statepg's celos_registers, shared by
// the instances of a cluster), and the key slaSinceKey, the time from
// which the records are kept. A miss whose deadline is before that time
// may have been sent by a celos that kept no record: it is noted, not
// sent (as before records were kept); one after it is sent unless it is
// recorded, whatever the engine's start — a deadline that passed while
// the server was down is sent at its first step, and a miss the previous
// owner of a workflow sent is not sent again by the new one.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

const (
	// slaBucket is the register bucket of the SLA misses sent.
	slaBucket = "celos-sla-missed"
	// slaSinceKey holds {"since": time}: records are kept from then on.
	slaSinceKey = "since"
	// slaKeep is how long a record is kept after its deadline: beyond it
	// the engine looks at the slot no more (a step looks at the deadlines
	// of a window's length before now, noteSLABeyond; only a rerun steps
	// the slot again).
	slaKeep = 2 * scheduler.Window
)

// slaRecord is the value of a miss's register (readable by people:
// GET /register).
type slaRecord struct {
	Workflow string `json:"workflow"`
	Slot     string `json:"slot"`
	Deadline string `json:"deadline"`
	Sent     string `json:"sent"` // the step's time
}

// slaPrefix is the key prefix of workflow wf's records: a workflow id may
// hold '.' and be 255 bytes long, a register key neither.
func slaPrefix(wf string) string {
	h := sha256.Sum256([]byte(wf))
	return hex.EncodeToString(h[:12]) + "-"
}

func slaKey(id slot.ID) string {
	return slaPrefix(id.Workflow) + strconv.FormatInt(id.Time.UnixMilli(), 10)
}

// slaSent reports whether the miss of slot id (deadline) counts as sent
// already: recorded, or with a deadline before records were kept. stepMu
// is held. An error (a store without registers, one that cannot be read)
// leaves the caller to its rule without records.
func (s *stepper) slaSent(id slot.ID, deadline time.Time) (bool, error) {
	e := s.e
	since, err := e.slaRecordsSince()
	if err != nil {
		return false, err
	}
	if deadline.Before(since) {
		return true, nil
	}
	sent, ok := e.slaRecorded[id.Workflow]
	if !ok {
		keys, err := s.slaKeysOf(id.Workflow)
		if err != nil {
			return false, fmt.Errorf("read the SLA misses sent of %s: %w", id.Workflow, err)
		}
		sent = make(map[int64]bool, len(keys))
		// (deadline − slot time is the SLA: records go slaKeep after
		// their deadline.)
		old := s.now.Add(-slaKeep - deadline.Sub(id.Time)).UnixMilli()
		for _, k := range keys {
			ms, err := strconv.ParseInt(strings.TrimPrefix(k, slaPrefix(id.Workflow)), 10, 64)
			switch {
			case err != nil:
				continue // not one of ours
			case ms < old:
				if err := e.regs.DeleteRegister(slaBucket, k); err != nil && !errors.Is(err, store.ErrNotFound) {
					e.log.Warn("old record of an SLA miss not removed", "workflow", id.Workflow, "key", k, "error", err)
				}
				continue
			}
			sent[ms] = true
		}
		e.slaRecorded[id.Workflow] = sent
	}
	return sent[id.Time.UnixMilli()], nil
}

// slaKeysOf returns the keys of workflow wf's SLA records. The bucket is
// listed once in a step and the keys grouped by workflow: after a restart
// every workflow past its deadline asks, and a listing per workflow read
// the file store's whole register directory each time. (Read in the step:
// another instance's records written since are seen at the next step, as
// when each workflow listed its own.)
func (s *stepper) slaKeysOf(wf string) ([]string, error) {
	if s.slaKeys == nil {
		keys, err := s.e.regs.RegisterKeys(slaBucket, "")
		if err != nil {
			return nil, err
		}
		s.slaKeys = make(map[string][]string)
		for _, k := range keys {
			if i := strings.IndexByte(k, '-'); i >= 0 {
				s.slaKeys[k[:i+1]] = append(s.slaKeys[k[:i+1]], k)
			}
		}
	}
	return s.slaKeys[slaPrefix(wf)], nil
}

// slaRecordsSince returns the time from which the misses sent are
// recorded, writing this engine's start as that time when no record was
// ever kept (a new database, or one of an older celos).
func (e *Engine) slaRecordsSince() (time.Time, error) {
	if !e.slaSince.IsZero() {
		return e.slaSince, nil
	}
	var v struct {
		Since time.Time `json:"since"`
	}
	raw, err := e.regs.GetRegister(slaBucket, slaSinceKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		v.Since = e.started
		raw, _ = json.Marshal(v)
		if err := e.regs.PutRegister(slaBucket, slaSinceKey, raw); err != nil {
			return time.Time{}, fmt.Errorf("record the start of the records of SLA misses: %w", err)
		}
	case err != nil:
		return time.Time{}, fmt.Errorf("read the start of the records of SLA misses: %w", err)
	default:
		if err := json.Unmarshal(raw, &v); err != nil || v.Since.IsZero() {
			// Unreadable (written by hand): from now on.
			v.Since = e.started
		}
	}
	e.slaSince = v.Since
	return v.Since, nil
}

// recordSLA records the misses the step sends (before the step's write,
// just after their deliveries are in the outbox: a kill between the two
// leaves a delivery and no record, and the miss is sent again under the
// same delivery id, slaDeliveryID). One that cannot be recorded is
// logged: it may be sent again after a restart or a take-over.
func (s *stepper) recordSLA() {
	for _, m := range s.slaMisses {
		raw, _ := json.Marshal(slaRecord{Workflow: m.id.Workflow, Slot: slot.FormatTime(m.id.Time),
			Deadline: slot.FormatTime(m.deadline), Sent: slot.FormatTime(s.now)})
		if err := s.e.regs.PutRegister(slaBucket, slaKey(m.id), raw); err != nil {
			if !errors.Is(err, errNoRegisters) {
				s.e.log.Warn("SLA miss sent but not recorded: it may be sent again after a restart", "slot", m.id.String(), "error", err)
			}
			continue
		}
		if sent := s.e.slaRecorded[m.id.Workflow]; sent != nil {
			sent[m.id.Time.UnixMilli()] = true
		}
	}
	s.slaMisses = nil
}

// slaDeliveryID is the delivery id of slot id's SLA miss to target url,
// the nth (from 0) of the miss's targets with that URL: the same each
// time the miss is sent (a miss is sent once; again only after a kill
// before its record), so that a receiver deduplicates. The first target
// of a URL has the id of the URL alone, as before targets were told
// apart (a record of the previous version and the miss sent again after
// it share their id); the others add their place among that URL's.
func slaDeliveryID(id slot.ID, url string, nth int) string {
	s := workflow.EventSLAMissed + "\x00" + id.String() + "\x00" + url
	if nth > 0 {
		s += "\x00" + strconv.Itoa(nth)
	}
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:12])
}

// slaMiss is a miss the step sent, to be recorded.
type slaMiss struct {
	id       slot.ID
	deadline time.Time
}
