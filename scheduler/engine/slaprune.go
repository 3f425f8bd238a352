package engine

// The prune of the engine's own register bucket: the records of the SLA
// misses sent (slasent.go) once no step can look at their deadline.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

// PruneSLARecords removes the records of SLA misses sent (register bucket
// celos-sla-missed) whose deadline is more than two windows before now:
// a step looks at deadlines a window back at most, so no step asks for
// them again (the rule by which the engine drops a workflow's old records
// when it first reads them; here also those of a workflow undeployed or
// no longer with an SLA, and those a long-running server accumulates).
// The bucket's key "since", keys of another form and records that do not
// read as one are kept: the bucket is the engine's, but a person may have
// written there. A record whose slot is younger than the limit is kept
// unread (a deadline is never before its slot). It returns how many it
// removed, and every error joined; one record's error does not stop the
// others. Registers of every other bucket are user data and never pruned.
func PruneSLARecords(regs Registers, now time.Time) (int, error) {
	keys, err := regs.RegisterKeys(slaBucket, "")
	if err != nil {
		return 0, fmt.Errorf("prune the records of SLA misses sent: %w", err)
	}
	old := now.Add(-slaKeep)
	n := 0
	var errs []error
	for _, k := range keys {
		at, ok := slaKeyTime(k)
		if !ok || !at.Before(old) {
			continue
		}
		raw, err := regs.GetRegister(slaBucket, k)
		if errors.Is(err, store.ErrNotFound) {
			continue // removed meanwhile (the engine, another instance)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("prune the records of SLA misses sent: read %s: %w", k, err))
			continue
		}
		var rec slaRecord
		if json.Unmarshal(raw, &rec) != nil {
			continue
		}
		deadline, err := slot.ParseTime(rec.Deadline)
		if err != nil || !deadline.Before(old) {
			continue
		}
		if err := regs.DeleteRegister(slaBucket, k); err != nil {
			errs = append(errs, fmt.Errorf("prune the records of SLA misses sent: remove %s: %w", k, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// slaKeyTime is the slot time of a record's key (slaKey: 24 hexadecimal
// digits, '-', the slot's Unix milliseconds); ok is false for another key.
func slaKeyTime(k string) (time.Time, bool) {
	hexPart, ms, found := strings.Cut(k, "-")
	if !found || len(hexPart) != 24 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return time.Time{}, false
	}
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(v).UTC(), true
}
