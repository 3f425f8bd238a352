package deploy

// Locks moved aside. removeLockAsRead moves a stale or broken lock aside
// to compare it with the one it read, and puts it back if it is another
// deploy's: while it is aside, the lock file is missing, and a third
// deploy created it and ran beside the owner of the lock moved aside.
// So a deploy that has just created the lock file looks for a lock of
// the project moved aside; it waits for it to be removed or put back
// (lockSettle), and if it is still there and not stale, leaves the lock
// to its owner. A release removes the releasing deploy's lock where it
// is, the lock file or aside.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"time"

	"github.com/celos-go/celos/targets"
)

// lockSettle is how long a deploy that has just created the lock file
// waits for a lock moved aside by another deploy to be removed or put
// back.
var lockSettle = 5 * time.Second

// asideLocks lists the project's locks moved aside (targets.TempName of
// the lock file, kind "old").
func (s *session) asideLocks() ([]string, error) {
	entries, err := s.wf.ReadDir(s.stateDir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.target.WorkflowsDir.Join(StateDir), err)
	}
	re := regexp.MustCompile(`^\.` + regexp.QuoteMeta(s.o.Project+".lock") + `\.old-[0-9a-f]{12}$`)
	var out []string
	for _, e := range entries {
		if re.MatchString(e.Name()) {
			out = append(out, path.Join(s.stateDir, e.Name()))
		}
	}
	return out, nil
}

// settleAside is called once this deploy (lock mine) has created the
// lock file. It returns a *LockedError naming another deploy's lock moved
// aside that is neither removed nor put back within lockSettle and is
// not stale (a live process, or not readable) unless --break-lock; a
// stale one (its deploy was killed while it was aside) is removed.
func (s *session) settleAside(ctx context.Context, mine lockInfo, host string) error {
	deadline := time.Now().Add(lockSettle)
	for {
		asides, err := s.asideLocks()
		if err != nil || len(asides) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return s.judgeAside(asides, mine, host)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *session) judgeAside(asides []string, mine lockInfo, host string) error {
	for _, a := range asides {
		raw, err := targets.ReadFile(s.wf, a, 1<<16)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var other lockInfo
		if err != nil || json.Unmarshal(raw, &other) != nil {
			other = lockInfo{User: "unknown", Host: "unknown"}
			if fi, err := s.wf.Stat(a); err == nil {
				other.Since = fi.ModTime()
			}
		}
		if other.ID == mine.ID {
			continue
		}
		who := shown(other.User) + "@" + shown(other.Host)
		if s.o.BreakLock || deadLocalOwner(other, host) {
			if err := s.wf.Remove(a); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the lock %s moved aside: %w", a, err)
			}
			s.warn("removed a lock of %s (pid %d) that a deploy interrupted while taking over a stale lock had moved aside", who, other.PID)
			continue
		}
		return &LockedError{
			Path:  s.target.WorkflowsDir.Join(StateDir, path.Base(a)).String(),
			Owner: fmt.Sprintf("%s (pid %d, %s)", who, other.PID, shown(other.Command)),
			Since: other.Since,
			Age:   time.Since(other.Since),
		}
	}
	return nil
}

// removeOwnAside removes this deploy's lock (id) where another deploy
// moved it aside and could not put it back.
func (s *session) removeOwnAside(id string) {
	asides, err := s.asideLocks()
	if err != nil {
		return
	}
	for _, a := range asides {
		raw, err := targets.ReadFile(s.wf, a, 1<<16)
		var l lockInfo
		if err == nil && json.Unmarshal(raw, &l) == nil && l.ID == id {
			if err := s.wf.Remove(a); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.warn("could not remove the lock %s: %v", a, err)
			}
		}
	}
}
