package sandbox

// The sandboxes of runs that died: a run removes its directories when it
// ends, also on Ctrl-C, but one killed with kill -9 (or by the OOM
// killer, or a power cut) cannot. Each run therefore marks its local
// directory as a live run's — a file runMarker in it, on which it holds
// an flock for as long as it runs — and every run starts by removing the
// directories of the runs whose lock nobody holds any more. An flock is
// released by the kernel when its holder dies in any way and cannot be
// held by another process by accident, as a PID (reused) could.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// runDirPrefix starts the name of every run's local directory.
	runDirPrefix = "celos-test-"
	// runMarker is the file in a run's local directory that marks it as
	// a celos test run's and that the live run holds locked. No case can
	// have this name ('+' is not in testcase.NamePattern).
	runMarker = "+celos-test-run"
	// maxMarker bounds the marker read.
	maxMarker = 4096
)

// runRecord is what a run's marker says about it.
type runRecord struct {
	PID int `json:"pid"`
	// FS and Root name the run's directory on a file system that is not
	// the local disk (hdfs://...); empty on the local disk, where it is
	// inside the local directory.
	FS   string `json:"fs,omitempty"`
	Root string `json:"root,omitempty"`
}

// claimRun marks dir, the run's new local directory, as a live run's: it
// writes the marker under another name, locks it, and only then renames
// it into place, so that no other run ever finds the marker of a live
// run unlocked. The returned file holds the lock until it is closed (or
// the process dies); it is not inherited by the commands' processes
// (O_CLOEXEC, as every file Go opens).
func claimRun(dir string, rec runRecord) (*os.File, error) {
	name := filepath.Join(dir, runMarker)
	f, err := os.OpenFile(name+".new", os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mark %s as a live run's: %w", dir, err)
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(name + ".new")
		return nil, fmt.Errorf("mark %s as a live run's: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(fmt.Errorf("lock %s: %w", f.Name(), err))
	}
	data, _ := json.Marshal(rec)
	if _, err := f.Write(append(data, '\n')); err != nil {
		return fail(err)
	}
	if err := os.Rename(name+".new", name); err != nil {
		return fail(err)
	}
	return f, nil
}

// unmark removes the marker of a run whose directory stays (--keep): a
// kept sandbox is the user's to look at and remove, never a later run's.
func unmark(dir string) error {
	if err := os.Remove(filepath.Join(dir, runMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unmark %s: %w", dir, err)
	}
	return nil
}

// Stale is a directory removed because the run that made it died.
type Stale struct {
	// Local is the run's local directory; Remote its directory on the
	// run's file system when that is not the local disk (FS + path).
	Local, Remote string
}

// removeStale removes, in dir, the local directories of runs that died,
// and their directories on env.FS. Only directories named celos-test-*,
// owned by this user, not symbolic links, holding a regular marker
// (runMarker, not a symbolic link) that no process holds locked are
// removed, without following any symbolic link in them; one whose run
// was on another file system than env's is left for a run there. It goes
// on past a directory it cannot remove and returns what it removed and
// the errors.
func removeStale(dir string, env Env) ([]Stale, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("look for the sandboxes of killed runs in %s: %w", dir, err)
	}
	var removed []Stale
	var errs []error
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), runDirPrefix) || e.Type()&os.ModeType != os.ModeDir {
			continue
		}
		st, ok, err := removeIfDead(filepath.Join(dir, e.Name()), env)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			removed = append(removed, st)
		}
	}
	return removed, errors.Join(errs...)
}

// removeIfDead removes the run directory dir if its run died (see
// removeStale), reporting whether it did.
func removeIfDead(dir string, env Env) (Stale, bool, error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return Stale{}, false, nil // gone meanwhile, a link, not ours to read
	}
	defer d.Close()
	if !ownedByMe(d) {
		return Stale{}, false, nil
	}
	// The marker, opened relative to the directory just checked: a
	// directory swapped for a link since is not followed.
	fd, err := unix.Openat(int(d.Fd()), runMarker, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stale{}, false, nil // no marker: not a run's, a kept one, or one just made
	}
	m := os.NewFile(uintptr(fd), filepath.Join(dir, runMarker))
	defer m.Close() // after the removal: the lock keeps another run out meanwhile
	if fi, err := m.Stat(); err != nil || !fi.Mode().IsRegular() || !ownedByMe(m) {
		return Stale{}, false, nil
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return Stale{}, false, nil // its run is live
		}
		return Stale{}, false, fmt.Errorf("lock %s: %w", m.Name(), err)
	}
	// The run is gone, but the processes it started may not be yet: a
	// job's supervisor kills what its command started when the run dies,
	// then writes its records and exits; a process nothing could kill
	// (its supervisor killed too) may still work in the directory.
	if pid := usedBy(dir); pid != 0 {
		return Stale{}, false, fmt.Errorf("%s, the sandbox of a killed run, is left: process %d still uses it", dir, pid)
	}
	data, err := io.ReadAll(io.LimitReader(m, maxMarker))
	var rec runRecord
	if err != nil || json.Unmarshal(data, &rec) != nil {
		return Stale{}, false, fmt.Errorf("%s is not a celos test run's marker: left alone", m.Name())
	}
	st := Stale{Local: dir}
	if rec.FS != "" {
		if env.FS == nil || env.FS.String() != rec.FS {
			return Stale{}, false, nil // for a run on that file system
		}
		// The run's directory on FS is named after its local one
		// (Run): a marker naming another directory is not followed.
		if !path.IsAbs(rec.Root) || path.Clean(rec.Root) != rec.Root || !strings.HasPrefix(path.Base(rec.Root), filepath.Base(dir)+"-") {
			return Stale{}, false, fmt.Errorf("%s names %s%s, which is not a run's directory: left alone", m.Name(), rec.FS, rec.Root)
		}
		if err := env.FS.RemoveAll(rec.Root); err != nil {
			return Stale{}, false, fmt.Errorf("remove %s%s, the sandbox of a killed run: %w", rec.FS, rec.Root, err)
		}
		st.Remote = rec.FS + rec.Root
	}
	if err := os.RemoveAll(dir); err != nil {
		return st, st.Remote != "", fmt.Errorf("remove %s, the sandbox of a killed run: %w", dir, err)
	}
	return st, true, nil
}

// ownedByMe reports whether f is owned by this process's effective user.
func ownedByMe(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// usedBy returns a process (other than this one) whose working directory
// or an open file is dir or inside it, or 0 if there is none it can see
// (processes of other users are not readable, and do not write in this
// user's directories).
func usedBy(dir string) int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	in := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	me := os.Getpid()
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		base := "/proc/" + e.Name()
		if cwd, err := os.Readlink(base + "/cwd"); err == nil && in(cwd) {
			return pid
		}
		fds, err := os.ReadDir(base + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(base + "/fd/" + fd.Name()); err == nil && in(l) {
				return pid
			}
		}
	}
	return 0
}
