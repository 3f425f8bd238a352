package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/celos-go/celos/internal/humandur"
	"github.com/celos-go/celos/targets"
)

// lockInfo is the content of a project's lock file.
type lockInfo struct {
	ID      string    `json:"id"`
	Project string    `json:"project"`
	User    string    `json:"user"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Since   time.Time `json:"since"`
	Command string    `json:"command"`
}

// LockedError reports a project locked by another deploy.
type LockedError struct {
	Path  string // URL of the lock file
	Owner string // user@host (pid N)
	Since time.Time
	Age   time.Duration
}

func (e *LockedError) Error() string {
	stale := ""
	if e.Age > time.Hour {
		stale = " It is old enough to be stale."
	}
	return fmt.Sprintf("the project is locked by %s since %s (%s ago): another deploy or undeploy may be running.%s "+
		"If none is, rerun with --break-lock (lock file: %s)",
		e.Owner, e.Since.UTC().Format(time.RFC3339), humandur.Format(e.Age.Round(time.Second)), stale, e.Path)
}

// held are the lock IDs this process holds, so that a lock left by this
// very process (pid reuse, an in-process test) is still told apart.
var held sync.Map

type lock struct {
	s    *session
	path string
	id   string
}

// acquireLock creates the project's lock file exclusively. A lock whose
// owner is a dead process on this machine is removed; any other existing
// lock is an error naming its owner and age, unless BreakLock.
func (s *session) acquireLock(ctx context.Context, command string) (*lock, error) {
	if err := s.wf.MkdirAll(s.stateDir); err != nil {
		return nil, err
	}
	userName, host := who(s.o)
	var b [8]byte
	_, _ = rand.Read(b[:])
	info := lockInfo{ID: hex.EncodeToString(b[:]), Project: s.o.Project, User: userName, Host: host,
		PID: os.Getpid(), Since: time.Now().UTC(), Command: command}
	data, _ := json.MarshalIndent(info, "", "  ")
	p := path.Join(s.stateDir, s.o.Project+".lock")
	for attempt := 0; attempt < 3; attempt++ {
		// Not synced: the exclusive create is what excludes another
		// deploy, and it is atomic without an fsync. The lock only
		// matters while this process runs; a crash of the target's host
		// ends this deploy's connection, and a lock that did not survive
		// it (or survived empty: "unknown" owner) is no worse than the
		// stale lock a synced one would leave. An fsync here was one
		// disk flush per deploy on the server (5 ms idle, 100–270 ms on
		// a busy disk) before anything else could happen.
		err := s.wf.WriteNew(ctx, p, bytes.NewReader(data), int64(len(data)), false)
		if err == nil {
			held.Store(info.ID, true)
			lk := &lock{s: s, path: p, id: info.ID}
			if err := s.settleAside(ctx, info, host); err != nil {
				lk.release()
				return nil, err
			}
			return lk, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create lock %s: %w", s.target.WorkflowsDir.Join(StateDir, s.o.Project+".lock"), err)
		}
		raw, rerr := targets.ReadFile(s.wf, p, 1<<16)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue // released meanwhile
		}
		var other lockInfo
		if rerr != nil || json.Unmarshal(raw, &other) != nil {
			other = lockInfo{User: "unknown", Host: "unknown"}
			if fi, err := s.wf.Stat(p); err == nil {
				other.Since = fi.ModTime()
			}
		}
		// Read from the target: quoted in messages when not printable.
		who := shown(other.User) + "@" + shown(other.Host)
		if s.o.BreakLock || deadLocalOwner(other, host) {
			removed, err := s.removeLockAsRead(p, raw, rerr == nil)
			if err != nil {
				return nil, err
			}
			if !removed {
				continue // another lock was there by then: look at it
			}
			if s.o.BreakLock {
				s.warn("broke the lock held by %s (pid %d) since %s", who, other.PID, other.Since.UTC().Format(time.RFC3339))
			} else {
				s.warn("removed a stale lock left by %s (pid %d, no longer running)", who, other.PID)
			}
			continue
		}
		return nil, &LockedError{
			Path:  s.target.WorkflowsDir.Join(StateDir, s.o.Project+".lock").String(),
			Owner: fmt.Sprintf("%s (pid %d, %s)", who, other.PID, shown(other.Command)),
			Since: other.Since,
			Age:   time.Since(other.Since),
		}
	}
	return nil, fmt.Errorf("could not take the lock %s after 3 attempts", p)
}

// removeLockAsRead removes the lock file p if it still is the lock read
// (raw, when readOK) and reports whether it did. Between reading a stale
// lock and removing it, another deploy that found it stale too may have
// removed it and taken the lock: removing by name would remove that new
// lock, and both deploys would hold it. So the lock is moved aside first
// (one rename: whoever moves it has it alone), compared with what was
// read, and put back if it is another one. A lock that could not be read
// (no permission) counts as the one read if it still cannot be.
func (s *session) removeLockAsRead(p string, raw []byte, readOK bool) (bool, error) {
	aside := targets.TempName(p, "old")
	if err := s.wf.Rename(p, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // released or taken away meanwhile
		}
		return false, fmt.Errorf("remove lock %s: %w", p, err)
	}
	got, err := targets.ReadFile(s.wf, aside, 1<<16)
	if (err == nil && readOK && bytes.Equal(got, raw)) || (err != nil && !readOK) {
		if err := s.wf.Remove(aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("remove lock %s: %w", aside, err)
		}
		return true, nil
	}
	// Another deploy's lock, created since: put it back, never over a
	// lock created in the meantime (a hard link fails on an existing
	// name).
	back := errors.ErrUnsupported
	if l, ok := s.wf.(targets.Linker); ok {
		if back = l.Link(aside, p); back == nil {
			_ = s.wf.Remove(aside)
		}
	}
	if errors.Is(back, errors.ErrUnsupported) {
		// No hard links (an SFTP server without hardlink@openssh.com):
		// a rename, unless a lock is there again.
		if exists, err := targets.Exists(s.wf, p); err != nil || exists {
			back = fmt.Errorf("%s exists again", p)
		} else {
			back = s.wf.Rename(aside, p)
		}
	}
	if back != nil {
		return false, fmt.Errorf("another deploy took the lock %s while this one removed a stale lock, and it could not be put back from %s (%v): "+
			"two deploys or undeploys may be running; wait for them, then remove %s", p, aside, back, aside)
	}
	return false, nil
}

// deadLocalOwner reports whether a lock was left by a process of this
// machine that no longer runs (or by this process, which no longer holds
// it).
func deadLocalOwner(l lockInfo, host string) bool {
	if l.Host != host || host == "" || l.PID <= 0 {
		return false
	}
	if l.PID == os.Getpid() {
		_, ok := held.Load(l.ID)
		return !ok
	}
	err := syscall.Kill(l.PID, 0)
	return errors.Is(err, syscall.ESRCH)
}

// release removes the lock file. It is best effort: a lock that cannot be
// removed (connection lost) is recognised as stale by the next deploy from
// this machine, or broken with --break-lock.
func (l *lock) release() {
	held.Delete(l.id)
	// A lock taken over with --break-lock is the other deploy's now.
	raw, err := targets.ReadFile(l.s.wf, l.path, 1<<16)
	if errors.Is(err, fs.ErrNotExist) {
		l.s.removeOwnAside(l.id) // moved aside by a deploy that could not put it back
		return
	}
	var cur lockInfo
	if err == nil && json.Unmarshal(raw, &cur) == nil && cur.ID != l.id {
		l.s.removeOwnAside(l.id)
		l.s.warn("the lock %s was taken over by %s@%s (pid %d, %s) while this command ran (--break-lock); it is left to it",
			l.path, shown(cur.User), shown(cur.Host), cur.PID, shown(cur.Command))
		return
	}
	if err := l.s.wf.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.s.warn("could not remove the lock %s: %v", l.path, err)
	}
}
