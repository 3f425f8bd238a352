package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
)

// PruneEach is the loop of a store's PruneBefore: for every workflow of
// wfs it calls prune with the workflow's limit before(wf), and refuses,
// reporting it, a limit inside the last minRetention before now (slots
// there may still be stepped). It returns the sum of what prune returned
// and every error, joined; one workflow's error does not stop the others.
func PruneEach(wfs []string, now time.Time, minRetention time.Duration, before func(wf string) time.Time,
	prune func(wf string, before time.Time) (int, error)) (int, error) {
	n := 0
	var errs []error
	for _, wf := range wfs {
		b := before(wf)
		if b.After(now.Add(-minRetention)) {
			errs = append(errs, fmt.Errorf("prune %s: %s is inside the last %v: slots there may still be stepped", wf, slot.FormatTime(b), minRetention))
			continue
		}
		m, err := prune(wf, b)
		n += m
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// CheckRetention refuses a prune limit inside the last minRetention
// before now (a store's Prune checks it before anything).
func CheckRetention(before, now time.Time, minRetention time.Duration) error {
	if before.After(now.Add(-minRetention)) {
		return fmt.Errorf("prune: %s is inside the last %v: slots there may still be stepped", slot.FormatTime(before), minRetention)
	}
	return nil
}
