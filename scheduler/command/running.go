package command

// Counting the jobs still running, and logging how jobs end.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/schema/workflow"
)

// Running counts the jobs that have not ended: started by this process or
// by an earlier one, with a process still alive. A server that stops
// leaves them running; the next start adopts them (Status reads their
// records), so the shutdown log says how many there are.
func (s *Service) Running() (int, error) {
	wfs, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("command service: %w", err)
	}
	n := 0
	var errs []error
	for _, wf := range wfs {
		if !wf.IsDir() || !workflow.IDPattern.MatchString(wf.Name()) {
			continue
		}
		jobs, err := os.ReadDir(filepath.Join(s.dir, wf.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, j := range jobs {
			if _, _, err := parseJobName(j.Name()); err != nil {
				continue
			}
			dir := filepath.Join(s.dir, wf.Name(), j.Name())
			if _, ended, _ := readExit(dir); !ended && !s.abandoned(dir, wf.Name()+"@"+j.Name()) {
				n++
			}
		}
	}
	return n, errors.Join(errs...)
}

// ended is the status of a job whose end is recorded. The first time this
// process sees it, it is logged: at INFO when the command succeeded, at
// WARN with the reason (exit 3, timed out, signal KILL, killed) when not.
func (s *Service) ended(externalID string, rec ExitRecord) external.Status {
	s.mu.Lock()
	first := !s.logged[externalID]
	if first {
		if s.logged == nil {
			s.logged = make(map[string]bool)
		}
		s.logged[externalID] = true
	}
	s.mu.Unlock()
	if first {
		if rec.success() {
			s.log.Info("command succeeded", "job", externalID)
		} else {
			s.log.Warn("command failed", "job", externalID, "reason", rec.detail())
		}
	}
	return exitStatus(rec)
}
