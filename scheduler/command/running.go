package command

// Counting the jobs still running, and logging how jobs end.

import (
	"github.com/celos-go/celos/scheduler/external"
)

// Running counts the jobs that have not ended: started by this process or
// by an earlier one, with a process still alive. A server that stops
// leaves them running; the next start adopts them (Status reads their
// records), so the shutdown log says how many there are.
func (s *Service) Running() (int, error) {
	n := 0
	err := s.eachJob(func(dir, externalID string, _ int64) error {
		if !s.over(dir, externalID) {
			n++
		}
		return nil
	})
	return n, err
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
