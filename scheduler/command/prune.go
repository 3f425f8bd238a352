package command

// Pruning the directories of ended jobs.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/celos-go/celos/schema/workflow"
)

// Prune removes the directories (records and logs) of jobs that ended and
// were started before before. Jobs still running, or whose end is not
// recorded, are kept. It returns the number of jobs removed.
func (s *Service) Prune(before time.Time) (int, error) {
	n := 0
	err := s.eachJob(func(dir, externalID string, started int64) error {
		if started >= before.UnixNano() || !s.over(dir, externalID) {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// over reports whether the job in dir has ended or will never end
// (abandoned).
func (s *Service) over(dir, externalID string) bool {
	_, ended, _ := readExit(dir)
	return ended || s.abandoned(dir, externalID)
}

// eachJob calls fn for the directory of every job record under the
// service's directory, with its external ID and start time (ns), and
// returns the errors of the directories it could not list and of fn,
// joined; it goes on past them.
func (s *Service) eachJob(fn func(dir, externalID string, started int64) error) error {
	wfs, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("command service: %w", err)
	}
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
			_, started, err := parseJobName(j.Name())
			if err != nil {
				continue
			}
			if err := fn(filepath.Join(s.dir, wf.Name(), j.Name()), wf.Name()+"@"+j.Name(), started); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// abandoned reports whether a job without an exit record will never get
// one: this process is not supervising it and no process of it is alive (a
// supervised job: claimed as abandoned, or its supervisor died; an older
// job: its process ended while celos was down). Its status is final
// ("never started", "exit status unknown"), so Prune may remove it like an
// ended one.
func (s *Service) abandoned(dir, externalID string) bool {
	s.mu.Lock()
	_, mine := s.procs[externalID]
	s.mu.Unlock()
	if mine {
		return false
	}
	job, err := readJob(dir)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) || len(findByExternalID(externalID)) == 0
	}
	if job.Supervised {
		if c, ok, err := readClaim(dir); err == nil && ok {
			return !c.Run || (!alive(jobRecord{PID: c.PID, Boot: c.Boot}, "") && len(findByExternalID(externalID)) == 0)
		}
		// Not claimed: abandoned unless a supervisor (which carries the
		// job's CELOS_EXTERNAL_ID) is about to claim it.
		return len(findByExternalID(externalID)) == 0
	}
	return !alive(job, externalID) && len(findByExternalID(externalID)) == 0
}
